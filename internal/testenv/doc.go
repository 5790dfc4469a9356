// Package testenv starts the real parts integration tests and benchmarks
// need: a private Prosody on free loopback ports with pingd's component (and
// Prosody's own pubsub for comparison) configured, the same with ejabberd,
// XMPP client sessions logged in to them, and the terminal client Profanity
// driven through tmux (profanity.go), Clock, the clock tests move by hand
// (clock.go), and WaitFor, the one wait-until every package's tests use
// (wait.go). Nothing here is mocked. The tests skip in -short mode, and
// skip with a message naming what to install when Prosody, ejabberd,
// PostgreSQL or a client program is missing, unless PINGD_INTEGRATION=require
// (make test sets it) turns that into a failure (integration.go).
//
// It is for tests and benchmarks only: no production code imports it. It
// targets loopback addresses only and cleans up what it starts.
package testenv
