// Package opml reads and writes OPML 2.0 subscription lists
// (http://opml.org/spec2.opml), the feed world's format for a reader's
// list of feeds: pingd writes its open nodes as one (GET /opml) and
// creates nodes from one (POST /api/opml, pingd import).
//
// It is a room of its own, like internal/xmlrpc and internal/soap: a
// codec that knows nothing of HTTP, the hub or the store, whose parser
// takes documents from outside and is fuzzed on its own (FuzzParse).
//
// Its room: Parse, which reads a document through internal/xmlguard under
// Limits (outlines, their nesting, and the guard's token limits) and
// returns the outlines that are feed subscriptions (an xmlUrl) or leaves
// without one, each with the folders it sits in; Write, which renders a
// subscription list. It imports no pingd package but internal/xmlguard.
package opml
