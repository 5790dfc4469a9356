// Package nodeurl names pingd's own URLs of a node under its public URL:
// the GetPingd descriptor (/feeds/{node}), the XRDS document
// (/xrds/{node}), the node's Atom and RSS feeds (/atom/{node},
// /rss/{node}), and the WebSub hub and rssCloud endpoints beside them. A
// node name is one percent-encoded path segment.
//
// Its room: NodeLinks (the URLs of one node), PathSegment (the encoding of
// a node name), and OwnNodeName, which reads one of those URLs back to its
// node's name, as written or in canonical form, so that a subscription or
// ping naming pingd's own feed is taken for the node and not for a source
// to fetch.
//
// It is a room of its own because the HTTP side (which serves the URLs and
// maps subscriptions to nodes), discovery (which writes them into
// documents), delivery (which signs and addresses notifications with
// them) and the feeds all need the same URLs, and none of them should
// import another for it. It is a leaf: it imports no pingd package but hub
// (for URL validation and canonical form), and does no I/O.
package nodeurl
