// Package discovery renders what lets publishers and consumers find a node:
// the GetPingd XRDS document, the X-XRDS-Location header value, the HTML
// <meta http-equiv> and <link rel="getpingd.updates.descriptor"> tags, and
// the snippets (rssCloud <cloud>, WebSub rel="hub" links) publishers paste
// into their pages and feeds.
//
// It is pure rendering: no I/O, no hub state beyond the node it is given.
package discovery
