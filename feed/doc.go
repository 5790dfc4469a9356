// Package feed is pingd's client and author of feeds: it fetches sources
// politely (conditional GET, gzip, RFC 3229 A-IM: feed, redirects, 410,
// size caps, an SSRF-guarded dialer), parses RSS and Atom into entries with
// stable ids and Atom payloads, schedules polls from a source's hints, and
// renders the Atom and RSS documents and XML patches pingd serves and sends.
//
// It implements hub.Fetcher and hub.Scheduler and knows nothing of
// subscribers, XMPP or the database.
package feed
