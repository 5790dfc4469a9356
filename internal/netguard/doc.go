// Package netguard keeps pingd's outbound HTTP from reaching the machine it
// runs on or the networks behind it (SSRF). Feed fetches and callbacks go to
// URLs that strangers name, so every connection is checked after DNS
// resolution, at dial time: loopback, private, link-local, carrier-grade
// NAT, cloud metadata and other non-public addresses are refused, on any
// port, and so are redirect targets, which are dialled through the same
// guard.
//
// Its room: the dial-time address check (built on code.dny.dev/ssrf), the
// error that names a refused address, and an *http.Client with sane
// timeouts built around it. AllowPrivate switches the check off for local
// development and tests.
//
// What it may not touch: anything above the connection — it knows nothing of
// feeds, deliveries, retries or the hub.
package netguard
