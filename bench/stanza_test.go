package bench

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

func split(t *testing.T, stream string, bufSize int) (header string, stanzas []string, err error) {
	t.Helper()
	sp := newSplitter(bufio.NewReaderSize(strings.NewReader(stream), bufSize), 1<<20)
	for {
		kind, elem, err := sp.Next()
		if err != nil {
			return header, stanzas, err
		}
		if kind == elemStreamHeader {
			header = string(elem)
			continue
		}
		stanzas = append(stanzas, string(elem))
	}
}

func TestSplitterStanzas(t *testing.T) {
	stanzas := []string{
		`<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms></stream:features>`,
		`<iq type='result' id='a1'/>`,
		`<message to="a@b/c" from='p.b'><event xmlns='http://jabber.org/protocol/pubsub#event'><items node='n'><item id='x&apos;1'><entry xmlns='http://www.w3.org/2005/Atom'><title>a &gt; b</title><summary>1 &lt; 2, "x" > y</summary></entry></item></items></event></message>`,
		`<message title='a>b' other="c/>d"><body><![CDATA[<not a tag/> ]] > ]]></body></message>`,
		`<presence/>`,
		`<iq id="deep"><a><b><c><d/></c></b></a></iq>`,
	}
	stream := `<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' id='s1' from='b'>` +
		" \n" + strings.Join(stanzas, " \n\t") + ` </stream:stream>`
	// Tiny buffers make every tag and text straddle reads.
	for _, size := range []int{16, 17, 64, 4096} {
		header, got, err := split(t, stream, size)
		if !errors.Is(err, errStreamClosed) {
			t.Fatalf("buffer %d: ended with %v, want the stream's end", size, err)
		}
		if id, _ := attr([]byte(header), "id"); id != "s1" {
			t.Errorf("buffer %d: header %q has id %q", size, header, id)
		}
		if len(got) != len(stanzas) {
			t.Fatalf("buffer %d: %d stanzas, want %d: %q", size, len(got), len(stanzas), got)
		}
		for i := range got {
			if got[i] != stanzas[i] {
				t.Errorf("buffer %d, stanza %d:\n got %s\nwant %s", size, i, got[i], stanzas[i])
			}
		}
	}
}

func TestSplitterErrors(t *testing.T) {
	for name, stream := range map[string]string{
		"cut in a stanza": `<stream:stream><message><body>hi`,
		"cut in a tag":    `<stream:stream><message to='x`,
		"cut in CDATA":    `<stream:stream><message><![CDATA[ > `,
	} {
		_, _, err := split(t, stream, 16)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: %v, want unexpected EOF", name, err)
		}
	}
	sp := newSplitter(bufio.NewReaderSize(strings.NewReader(`<stream:stream><message>`+strings.Repeat("x", 5000)+`</message>`), 16), 1000)
	if _, _, err := sp.Next(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sp.Next(); !errors.Is(err, errTooLarge) {
		t.Errorf("oversized stanza: %v, want errTooLarge", err)
	}
	if _, _, err := split(t, `<stream:stream/>`, 64); err == nil || errors.Is(err, errStreamClosed) {
		t.Errorf("self-closing stream header: %v, want an error", err)
	}
}

func TestAttrAndChild(t *testing.T) {
	elem := []byte(`<message xmlns='jabber:client' to = "a@b/c &amp; d" from='x'><event><items node='n'><item id="i-7"><entry><id>urn:x</id></entry></item></items></event></message>`)
	for name, want := range map[string]string{"to": "a@b/c & d", "from": "x", "xmlns": "jabber:client"} {
		if got, ok := attr(elem, name); !ok || got != want {
			t.Errorf("attr %s = %q %v, want %q", name, got, ok, want)
		}
	}
	if _, ok := attr(elem, "id"); ok {
		t.Error("found an id on <message/>: attr must read the start tag only")
	}
	item := child(elem, "item")
	if id, _ := attr(item, "id"); id != "i-7" {
		t.Errorf("item id %q", id)
	}
	if child(elem, "items") == nil || child(elem, "ite") != nil {
		t.Error("child matched a prefix of a name")
	}
	if got := innerText(child(elem, "id")); got != "urn:x" {
		t.Errorf("innerText = %q", got)
	}
	if got := stanzaName([]byte(`<stream:features>`)); got != "features" {
		t.Errorf("stanzaName = %q", got)
	}
}

func TestXMLEscapeRoundTrip(t *testing.T) {
	const s = `a<b>&"c'd`
	elem := []byte(`<x v='` + xmlEscape(s) + `'/>`)
	if got, _ := attr(elem, "v"); got != s {
		t.Errorf("round trip gave %q", got)
	}
}

// FuzzSplitter feeds the splitter arbitrary streams: it must never panic
// or loop, every stanza it returns must be a tag-delimited slice of the
// input, and a stream of well-formed stanzas must come back unchanged.
func FuzzSplitter(f *testing.F) {
	f.Add([]byte(`<stream:stream><message to='a'><body>x</body></message><iq/></stream:stream>`), uint8(16))
	f.Add([]byte(`<?xml version='1.0'?><stream:stream a="b>"><x><![CDATA[<y>]]></x></stream:stream>`), uint8(20))
	f.Add([]byte(`<s><a b='"'/><!-- c > --><d>e</d>`), uint8(17))
	f.Fuzz(func(t *testing.T, data []byte, size uint8) {
		sp := newSplitter(bufio.NewReaderSize(bytes.NewReader(data), 16+int(size)), 4096)
		for range len(data) + 1 {
			kind, elem, err := sp.Next()
			if err != nil {
				return
			}
			if len(elem) < 2 || elem[0] != '<' || elem[len(elem)-1] != '>' {
				t.Fatalf("element %q is not tag-delimited", elem)
			}
			if !bytes.Contains(data, elem) {
				t.Fatalf("element %q is not a slice of the input", elem)
			}
			if kind == elemStanza {
				// Whatever attr and child find, they must not panic.
				_, _ = attr(elem, "id")
				if c := child(elem, "item"); c != nil {
					_ = innerText(c)
				}
			}
		}
		t.Fatalf("Next returned more elements than the input has bytes")
	})
}

// FuzzSplitterWellFormed builds a stream of real stanzas from the input
// text and checks they come back exactly.
func FuzzSplitterWellFormed(f *testing.F) {
	f.Add("hello", "a>b", uint8(16))
	f.Add("<![CDATA[", "'\"", uint8(1))
	f.Fuzz(func(t *testing.T, text, attrValue string, size uint8) {
		var stanzas []string
		for i := range 3 {
			var b bytes.Buffer
			e := xml.NewEncoder(&b)
			start := xml.StartElement{Name: xml.Name{Local: "message"}, Attr: []xml.Attr{{Name: xml.Name{Local: "id"}, Value: attrValue}}}
			body := xml.StartElement{Name: xml.Name{Local: "body"}}
			if err := e.EncodeToken(start); err != nil {
				return
			}
			if i == 1 {
				_ = e.EncodeToken(body)
				if err := e.EncodeToken(xml.CharData(text)); err != nil {
					return
				}
				_ = e.EncodeToken(body.End())
			}
			if err := e.EncodeToken(start.End()); err != nil {
				return
			}
			if err := e.Flush(); err != nil {
				return
			}
			stanzas = append(stanzas, b.String())
		}
		stream := "<stream:stream>" + strings.Join(stanzas, "") + "</stream:stream>"
		sp := newSplitter(bufio.NewReaderSize(strings.NewReader(stream), 16+int(size)), 1<<20)
		if kind, _, err := sp.Next(); err != nil || kind != elemStreamHeader {
			t.Fatalf("header: %v", err)
		}
		for i, want := range stanzas {
			_, got, err := sp.Next()
			if err != nil {
				t.Fatalf("stanza %d: %v", i, err)
			}
			if string(got) != want {
				t.Fatalf("stanza %d:\n got %q\nwant %q", i, got, want)
			}
			if i == 0 && !strings.Contains(want, "&#") {
				// Named entities are all attr unescapes; it must read the
				// value encoding/xml reads.
				var ref struct {
					ID string `xml:"id,attr"`
				}
				if err := xml.Unmarshal(got, &ref); err != nil {
					t.Fatalf("encoding/xml cannot read %q: %v", got, err)
				}
				if v, _ := attr(got, "id"); v != ref.ID {
					t.Fatalf("id %q, encoding/xml reads %q", v, ref.ID)
				}
			}
		}
		if _, _, err := sp.Next(); !errors.Is(err, errStreamClosed) {
			t.Fatalf("end: %v", err)
		}
	})
}
