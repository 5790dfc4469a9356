package feed

import (
	"encoding/xml"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/html/charset"

	"github.com/pingd/pingd/internal/xmlguard"
)

// Limits on a fetched feed document, checked by a streaming pass before
// gofeed or etree reads it. gofeed parses extension elements recursively (a
// deep enough document overflows the stack, which Go cannot recover from)
// and spends about 330 bytes on each; these limits keep any document within
// the body cap to a bounded parse. No real feed comes near them.
const (
	// MaxDepth bounds nesting: feeds nest a dozen levels, XHTML content a
	// few more.
	MaxDepth = 256
	// MaxNodes bounds the elements and attributes of a document: a 10 MiB
	// podcast feed of 3,000 episodes has about 80,000. At the limit gofeed
	// holds about 70 MB.
	MaxNodes = 200_000
	// MaxEntries bounds the entries (<item>, <entry>) of a document; gofeed
	// and the payloads take about 3 KB each while a document is parsed.
	MaxEntries = 10_000
	// MaxStartTagBytes bounds one start tag with its attributes: the
	// decoder collects a tag's attributes before anyone can count them.
	MaxStartTagBytes = 64 << 10
	// MaxNamespacesInScope bounds the namespace declarations in scope at
	// once (feeds declare about a dozen): gofeed's XML reader copies them
	// for every element.
	MaxNamespacesInScope = 64
	// MaxTextWork bounds the bytes gofeed's extension parser copies when it
	// appends each piece of an element's text (pieces split by comments,
	// CDATA sections or child elements) to what it has: without it, text in
	// many small pieces makes the copying quadratic in the body's size.
	MaxTextWork = 1 << 30
)

// ErrDocumentRefused is returned (inside a *hub.FetchError for a fetch)
// for a document that passes one of the limits above.
var ErrDocumentRefused = errors.New("document refused")

// feedDecoding is gofeed's decoding (non-strict, its charset reader, C0
// control characters dropped) under the limits, so the check sees the
// element stream gofeed will see.
var feedDecoding = xmlguard.Options{
	Limits: xmlguard.Limits{
		Depth:         MaxDepth,
		Nodes:         MaxNodes,
		StartTagBytes: MaxStartTagBytes,
		Namespaces:    MaxNamespacesInScope,
		TextWork:      MaxTextWork,
	},
	CharsetReader:    charset.NewReaderLabel,
	DropControlChars: true,
}

// checkFeed reports whether body is an RSS or Atom document, and refuses
// (ErrDocumentRefused) one that passes a limit. A document that is not a
// feed is only read up to its root element: it is hashed, not parsed.
func checkFeed(body []byte) (isFeed bool, err error) {
	d := xmlguard.NewDecoder(body, feedDecoding)
	var root xml.StartElement
	for found := false; !found; {
		tok, err := d.Token()
		if err != nil {
			return false, refused(err)
		}
		root, found = tok.(xml.StartElement)
	}
	if !feedRoot(body, root) {
		return false, nil
	}
	entries := 0
	for {
		tok, err := d.Token()
		if err != nil {
			return true, refused(err)
		}
		// Entries are children of the root (Atom, RSS 1.0) or of the
		// channel (RSS 0.9x, 2.0); gofeed compares lower-cased names.
		if se, ok := tok.(xml.StartElement); ok && d.Depth() <= 3 &&
			(strings.EqualFold(se.Name.Local, "item") || strings.EqualFold(se.Name.Local, "entry")) {
			if entries++; entries > MaxEntries {
				return true, fmt.Errorf("%w: more than %d entries", ErrDocumentRefused, MaxEntries)
			}
		}
	}
}

// feedRoot is gofeed.DetectFeedType's test for RSS and Atom, without its
// copy of the body: the first byte past white space and byte order marks
// is '<', and the root element's lower-cased local name is rss, rdf or
// feed.
func feedRoot(body []byte, root xml.StartElement) bool {
	i := 0
	for i < len(body) && strings.IndexByte(" \r\n\t\xfe\xff\x00\xef\xbb\xbf", body[i]) >= 0 {
		i++
	}
	if i == len(body) || body[i] != '<' {
		return false
	}
	switch strings.ToLower(root.Name.Local) {
	case "rss", "rdf", "feed":
		return true
	}
	return false
}

// checkXML refuses (ErrDocumentRefused) a document that passes a limit,
// whatever its root; etree readers call it first.
func checkXML(body []byte) error {
	return refused(xmlguard.Check(body, feedDecoding))
}

// refused turns a limit error into ErrDocumentRefused; decoding errors
// are left to the parser, which stops at the same place.
func refused(err error) error {
	if errors.Is(err, xmlguard.ErrLimit) {
		return fmt.Errorf("%w: %w", ErrDocumentRefused, err)
	}
	return nil
}
