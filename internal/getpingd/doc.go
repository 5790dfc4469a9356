// Package getpingd is the vocabulary of GetPingd (seed 002: XRDS
// discovery, webhook and XMPP subscription requests, whitelists) as pingd
// speaks it: httpapi takes subscription requests, whitelist applies the
// XMPP consumer ones, delivery sends webhooks in the method and diff
// format asked for, and discovery writes and reads the XRDS documents and
// links that carry these names.
//
// Its room: the names (link relations, the GetPingd namespaces of an
// XRDS document, the service type, the request content types and HTTP
// methods, the security values, the webhook methods and diff formats),
// the one parser of both subscription request types (request.go:
// ParseWebhookRequest and ParseConsumerRequest share the grammar of
// <subscribe>/<unsubscribe> holding one <url> or <consumer>, size-capped,
// valid UTF-8, no DOCTYPE, bounded nesting) and pingd's answer documents
// (answer.go). The XRDS document itself is discovery's; JIDs are validated
// and reduced to bare JIDs by whitelist.
//
// It is a room of its own, as mellium gives each XEP its package, so that
// the HTTP side, whitelist, discovery and delivery share one definition
// of the protocol without importing each other. Its parser takes input
// from outside and is fuzzed (FuzzParseWebhookRequest here,
// FuzzParseConsumerRequest through whitelist). It does no I/O and imports
// no pingd package but hub (for the canonical form of callback URLs).
package getpingd
