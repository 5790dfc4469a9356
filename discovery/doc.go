// Package discovery renders what lets publishers and consumers find a node:
// the GetPingd XRDS document, the X-XRDS-Location header value, the HTML
// <meta http-equiv> and <link rel="getpingd.updates.descriptor"> tags, and
// the snippets (rssCloud <cloud>, WebSub rel="hub" links) publishers paste
// into their pages and feeds.
//
// Its room: NodeLinks (the node's URLs under pingd's public URL, a node name
// being one percent-encoded path segment), NewDescriptor and XRDS (the
// document in the exact tree of the design, served as ContentTypeXRDS),
// DescriptorPage (the HTML page at the descriptor URL), Snippets (what a
// publisher pastes, JSON-friendly for the admin API) and PreferXRDS (Accept
// negotiation between the page and the XRDS document).
//
// It is pure rendering: no I/O, no hub state beyond the node it is given,
// no HTTP routing (httpapi serves what it renders). Every value is escaped
// for its context, so any node name and URL gives a well-formed document.
package discovery
