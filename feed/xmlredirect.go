package feed

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
)

// maxRedirectDocBytes bounds the bodies examined for an XML redirect: the
// document is a few lines, so anything larger is not one.
const maxRedirectDocBytes = 16 << 10

// XMLRedirect reports whether body is an RSS Feed State XML redirect,
//
//	<redirect><newLocation>URL</newLocation></redirect>
//
// and returns the new location it names; an empty location (an empty or
// self-closed newLocation) means the feed is gone. A <redirect> root without
// a newLocation element is not a redirect. The reading is lenient because
// the published example is not well-formed (its newLocation is never
// closed): the location is the text up to the next tag.
func XMLRedirect(body []byte) (newLocation string, ok bool) {
	if len(body) > maxRedirectDocBytes || !bytes.Contains(body, []byte("newLocation")) {
		return "", false
	}
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = false
	d.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }
	depth := 0
	for {
		tok, err := d.Token()
		if err != nil {
			return "", false
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if depth == 1 && t.Name.Local != "redirect" {
				return "", false
			}
			if depth == 2 && t.Name.Local == "newLocation" {
				return readLocation(d), true
			}
		case xml.EndElement:
			depth--
			if depth <= 0 {
				return "", false
			}
		case xml.CharData:
			if depth == 0 && len(bytes.TrimSpace(t)) > 0 {
				return "", false
			}
		}
	}
}

// readLocation collects the character data after <newLocation> up to the
// next tag of any kind, or the end of the input.
func readLocation(d *xml.Decoder) string {
	var b strings.Builder
	for b.Len() <= maxRedirectDocBytes {
		tok, err := d.Token()
		if err != nil {
			break
		}
		cd, isText := tok.(xml.CharData)
		if !isText {
			if _, isComment := tok.(xml.Comment); isComment {
				continue
			}
			break
		}
		b.Write(cd)
	}
	return strings.TrimSpace(b.String())
}
