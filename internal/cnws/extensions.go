package cnws

import (
	"bytes"
	"encoding/xml"
)

// CNWS extensions (seed 000: "extra information … in a different
// namespace"): the elements of other namespaces inside a <resourceChange>
// are kept and passed on, in CNWS notifications as they came and in the
// Atom entries of items as extension elements. Each is re-encoded on its
// own by encoding/xml, which declares every namespace it uses, so it
// stays well-formed wherever it is put. Comments and processing
// instructions inside them are dropped. They are bounded in number and
// size; more is refused rather than silently cut.

const (
	maxCNWSExtensions     = 16
	maxCNWSExtensionBytes = 16 << 10
)

type extensionCapture struct {
	all   bytes.Buffer
	cur   bytes.Buffer
	enc   *xml.Encoder
	count int
}

// start begins a new extension element.
func (c *extensionCapture) start(t xml.StartElement) error {
	c.count++
	if c.count > maxCNWSExtensions {
		return errorf("more than %d extension elements", maxCNWSExtensions)
	}
	c.cur.Reset()
	c.enc = xml.NewEncoder(&c.cur)
	return c.token(t)
}

// token adds a token of the element being captured (none: ignored).
func (c *extensionCapture) token(tok xml.Token) error {
	if c.enc == nil {
		return nil
	}
	switch t := tok.(type) {
	case xml.StartElement:
		// Namespace declarations are written again by the encoder for
		// the names that need them.
		attrs := t.Attr[:0:0]
		for _, a := range t.Attr {
			if a.Name.Space == "xmlns" || (a.Name.Space == "" && a.Name.Local == "xmlns") {
				continue
			}
			attrs = append(attrs, a)
		}
		t.Attr = attrs
		tok = t
	case xml.EndElement, xml.CharData:
	default:
		return nil
	}
	if err := c.enc.EncodeToken(tok); err != nil {
		return errorf("extension element: %v", err)
	}
	if err := c.enc.Flush(); err != nil {
		return errorf("extension element: %v", err)
	}
	if c.all.Len()+c.cur.Len() > maxCNWSExtensionBytes {
		return errorf("extension elements larger than %d bytes", maxCNWSExtensionBytes)
	}
	return nil
}

// end closes the element being captured.
func (c *extensionCapture) end() error {
	if c.enc == nil {
		return nil
	}
	c.all.Write(c.cur.Bytes())
	c.enc = nil
	return nil
}

// String is every captured element, in order.
func (c *extensionCapture) String() string { return c.all.String() }
