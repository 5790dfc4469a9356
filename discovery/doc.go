// Package discovery renders what lets publishers and consumers find a node:
// the GetPingd XRDS document, the X-XRDS-Location header value, the HTML
// <meta http-equiv> and <link rel="getpingd.updates.descriptor"> tags, and
// the snippets (rssCloud <cloud>, WebSub rel="hub" links) publishers paste
// into their pages and feeds.
//
// Its room: NewDescriptor and XRDS (descriptor.go, xrds.go: the
// document in the exact tree of the design, served as ContentTypeXRDS),
// DescriptorPage (the HTML page at the descriptor URL, with the
// DescriptorPageCSP it is served under; from templates/descriptor.html and
// its inline style sheet, it shows people the node's recent entries, the
// chat command, the xmpp: roster, message and XEP-0060 subscribe URIs of
// xmppuri.go and the QR code of qr.go), Snippets (what a
// publisher pastes, JSON-friendly for the admin API) and PreferXRDS (Accept
// negotiation between the page and the XRDS document).
//
// The QR code is encoded by github.com/boombuler/barcode: maintained
// (releases into 2025), pure Go without dependencies of its own, widely
// used (for TOTP enrolment codes among others), and it hands out the
// module matrix, from which qr.go draws an inline SVG element that the
// page's policy needs no exception for (an <img> of a data: URI or of a
// served SVG would need img-src).
//
// The node's own URLs it writes into these documents come from
// internal/nodeurl. The rendering is pure: no I/O, no hub state beyond the
// node it is given, no HTTP routing (httpapi serves what it renders).
// Every value is escaped for its context, so any node name and URL gives a
// well-formed document.
//
// The client side reads what others publish the same way (find.go, with
// the XRDS reader and ChooseService in findxrds.go; client.go):
// Client.Discover fetches a URL through the SSRF-guarded, size-capped HTTP
// client it is given (at most 5 redirects; every request, each hop of a
// redirect and each descriptor included, is counted against the budget of
// the look-up its context belongs to, internal/ratelimit's Lookups) and
// reports
// the feeds an HTML page links to (ranked: Atom, then RSS, then RDF, in
// page order, comment feeds last), GetPingd descriptors (X-XRDS-Location,
// the meta tag, link rel, and atom:link in feeds) with the services of
// their XRDS documents in XRD priority order and the one a client chooses
// per subscription type (ChooseService), WebSub hubs and self URLs (Link
// headers, read by internal/linkheader; link tags; atom:link in feeds) and
// rssCloud <cloud> elements. Client also implements hub.SourceResolver: a
// page's source is its best feed; Follow discovers that feed too, for
// everything a page leads to. PagePings (pagepings.go) is the hub's ping
// listener that, for a weblog ping matching no followed source, looks at
// the page it names for a followed feed (rate- and concurrency-bound, per
// client address too) and remembers the feeds a page led to, so that every
// later ping of the page reaches them; its
// owner closes it before the store, which ends and joins the look-ups
// under way. These parsers take outside input and are
// fuzzed; the XML ones read through internal/xmlguard, which bounds what
// one start tag may cost. The client side may read the network only
// through the client it is given and never touches the store.
package discovery
