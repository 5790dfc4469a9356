// Package feed is pingd's client and author of feeds: it fetches sources
// politely (conditional GET, gzip, RFC 3229 A-IM: feed, redirects, 410,
// size caps, an SSRF-guarded dialer), parses RSS and Atom into entries with
// stable ids and Atom payloads, schedules polls from a source's hints, and
// renders the Atom and RSS documents and XML patches pingd serves and sends.
//
// Its rooms:
//   - fetcher.go, decode.go, delta.go, xmlredirect.go: Fetcher, the
//     hub.Fetcher (redirects followed by hand, content decoding, charset
//     conversion to UTF-8, merging "226 IM Used" deltas, RSS Feed State XML
//     redirects, the answer's Link header links for upstream push, parsed
//     by internal/linkheader);
//   - limits.go: the limits (nesting depth, elements and attributes,
//     entries, start tag bytes, namespaces in scope, text concatenation) a
//     fetched document is checked against, in one streaming pass through
//     internal/xmlguard, before gofeed or etree reads it;
//   - parse.go: Parse, entry identity (EntryID, AtomID) and Atom payloads
//     (the document's polling hints, RSS ttl/skipHours/skipDays and sy:,
//     are read in hints.go, with SyInterval); every link it takes from a source is
//     resolved and kept only when it is a web link (hub.WebLink), and the
//     renderers drop other links of stored items again; an entry's payload
//     stays within hub.MaxEntryPayloadBytes (a larger entry loses its
//     content, which then points at the entry's page);
//   - scheduler.go: Scheduler, the hub.Scheduler;
//   - render.go, patch.go: AtomFeed, RSSFeed, Patch and ApplyPatch for the
//     HTTP side and deliveries, and NodeFeedMeta, the one description of a
//     node's own feed (its URLs from internal/nodeurl) that the node feeds
//     and the documents deliveries send share; renderentry.go makes an
//     entry's Atom form and reads stored ones (CompleteEntry, atomEntry,
//     web links only, the entry's times), and
//     patchselector.go reads the bounded XPath subset of RFC 7351 patch
//     selectors that ApplyPatch takes.
//
// It implements hub.Fetcher and hub.Scheduler and knows nothing of
// subscribers, XMPP, HTTP routing or the database: it turns bytes from the
// web into hub types and hub types into documents. Its outbound
// connections go through internal/netguard.
package feed
