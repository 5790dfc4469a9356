// Package xmlguard reads XML documents that come from outside (fetched
// feeds, feed deltas, discovery documents, OPML lists) under limits, before any parser
// that recurses or builds a tree of them sees them.
//
// It is a room of its own because several packages need the same guard:
// feed, in front of gofeed and etree; discovery, whose own token loops
// read fetched pages; and internal/opml, which reads subscription lists
// sent to the admin API. Go cannot recover from a stack overflow, and encoding/xml
// has no limit of its own on attributes or on how much a start tag may
// allocate, so the guard must run first and stop early.
//
// Its room: Decoder, a non-strict encoding/xml decoder whose every token
// is counted against Limits (nesting depth, elements and attributes, the
// bytes of one start tag, namespace declarations in scope, the text
// concatenation a naive reader would do), and Check, which runs one to the
// end. The decoder can mirror another reader's settings (its charset
// reader, gofeed's dropping of control characters), so that it sees the
// element stream that reader will see.
//
// What it may not touch: it knows nothing of feeds or of the network, and
// imports no pingd package.
package xmlguard
