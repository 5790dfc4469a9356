package xmlguard

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/net/html/charset"
)

// feedOptions are the settings gofeed decodes with.
var feedOptions = Options{CharsetReader: charset.NewReaderLabel, DropControlChars: true}

// plainTokens decodes body with a bare xml.Decoder set up like opts.
func plainTokens(body []byte, opts Options) ([]xml.Token, error) {
	var r io.Reader = bytes.NewReader(body)
	if opts.DropControlChars {
		r = &controlCharFilter{r: r}
	}
	d := xml.NewDecoder(r)
	d.Strict = false
	d.CharsetReader = opts.CharsetReader
	var out []xml.Token
	for {
		tok, err := d.Token()
		if err != nil {
			return out, err
		}
		out = append(out, xml.CopyToken(tok))
	}
}

func guardedTokens(body []byte, opts Options) ([]xml.Token, error) {
	g := NewDecoder(body, opts)
	var out []xml.Token
	for {
		tok, err := g.Token()
		if err != nil {
			return out, err
		}
		out = append(out, xml.CopyToken(tok))
	}
}

// TestTokensAreThePlainDecoders: under limits it does not reach, the
// guard sees exactly the tokens a bare decoder with the same settings
// sees, to the same error.
func TestTokensAreThePlainDecoders(t *testing.T) {
	docs := []string{
		`<?xml version="1.0"?><rss version="2.0"><channel><title>T &amp; U</title><item><guid>1</guid></item></channel></rss>`,
		`<feed xmlns="http://www.w3.org/2005/Atom" xmlns:x="urn:x"><entry><x:a b="1" c='2'/>text<![CDATA[<p>html</p>]]><!-- c --></entry></feed>`,
		"<rss>\x01<ch\x02annel>bell\x07</channel></rss>",
		`<?xml version="1.0" encoding="ISO-8859-1"?><rss><title>` + "caf\xe9" + `</title><a b=c d></a></rss>`,
		`<?xml version="1.0" encoding="windows-1252"?>` + "\n<rss><x:a xmlns:x='u'>\x93q\x94</x:a></rss>",
		`<a><b></a></b>`,
		`<a>unterminated`,
		`<a b="1" c>&nbsp;&bogus;</a>`,
		`<!DOCTYPE rss [<!ENTITY e "x">]><rss>&e;</rss>`,
		`text before<root/>`,
		`<a b="x>y">z</a>`,
		"",
	}
	for i, doc := range docs {
		want, wantErr := plainTokens([]byte(doc), feedOptions)
		got, gotErr := guardedTokens([]byte(doc), feedOptions)
		if !reflect.DeepEqual(got, want) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Errorf("document %d: guard\n%#v, %v\nplain decoder\n%#v, %v", i, got, gotErr, want, wantErr)
		}
	}
}

func limitOf(t *testing.T, err error) *LimitError {
	t.Helper()
	var le *LimitError
	if !errors.As(err, &le) || !errors.Is(err, ErrLimit) {
		t.Fatalf("got %v, want a *LimitError", err)
	}
	return le
}

func TestLimits(t *testing.T) {
	nested := func(n int) string { return strings.Repeat("<a>", n) + strings.Repeat("</a>", n) }
	withNS := func(n int) string {
		var b strings.Builder
		b.WriteString("<r")
		for i := range n {
			fmt.Fprintf(&b, ` xmlns:p%d="u"`, i)
		}
		b.WriteString("><c/></r>")
		return b.String()
	}
	pieces := func(n int) string { return "<r><x>" + strings.Repeat("ab<!---->", n) + "</x></r>" }
	tests := []struct {
		name       string
		limits     Limits
		ok, tooBig string
		what       string
	}{
		{"depth", Limits{Depth: 5}, nested(5), nested(6), "nesting depth"},
		{"elements", Limits{Nodes: 4}, "<r><a/><a/><a/></r>", "<r><a/><a/><a/><a/></r>", "elements and attributes"},
		{"attributes count as nodes", Limits{Nodes: 4}, `<r a="1" b="2" c="3"/>`, `<r a="1" b="2" c="3" d="4"/>`, "elements and attributes"},
		{"namespaces in scope", Limits{Namespaces: 3}, withNS(3), withNS(4), "namespace declarations in scope"},
		{"namespaces leave scope with their element", Limits{Namespaces: 2},
			`<r><a xmlns:p="u" xmlns:q="v"/><b xmlns:p="u" xmlns:q="v"/></r>`,
			`<r xmlns="w"><a xmlns:p="u" xmlns:q="v"/></r>`, "namespace declarations in scope"},
		// Text in k pieces costs 2+4+…+2k: 2·k(k+1)/2.
		{"text pieces", Limits{TextWork: 2 * 10 * 11 / 2}, pieces(10), pieces(11), "text concatenation bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{Limits: tt.limits}
			if err := Check([]byte(tt.ok), opts); err != nil {
				t.Errorf("at the limit: %v", err)
			}
			if le := limitOf(t, Check([]byte(tt.tooBig), opts)); le.What != tt.what {
				t.Errorf("over the limit: %v, want %q", le, tt.what)
			}
		})
	}
}

// TestStartTagBytes: a start tag of exactly the limit passes and one byte
// more is cut, wherever the tag starts: first in the document, after a
// tag, after text (which the decoder ends by putting the '<' back), and
// after a charset reader took over.
func TestStartTagBytes(t *testing.T) {
	const limit = 64
	tag := func(n int) string { // a start tag of n bytes
		s := `<t a="` + strings.Repeat("x", n-len(`<t a="">`)) + `">`
		if len(s) != n {
			panic(len(s))
		}
		return s
	}
	for _, wrap := range []struct{ name, before, after string }{
		{"first", "", "</t>"},
		{"after a tag", "<r>", "</t></r>"},
		{"after text", "<r>some text", "</t></r>"},
		{"after a comment", "<r><!-- c -->", "</t></r>"},
		{"after a charset switch", `<?xml version="1.0" encoding="ISO-8859-1"?><r>caf` + "\xe9", "</t></r>"},
	} {
		t.Run(wrap.name, func(t *testing.T) {
			opts := Options{Limits: Limits{StartTagBytes: limit}, CharsetReader: charset.NewReaderLabel}
			if err := Check([]byte(wrap.before+tag(limit)+wrap.after), opts); err != nil {
				t.Errorf("a tag of %d bytes: %v", limit, err)
			}
			if le := limitOf(t, Check([]byte(wrap.before+tag(limit+1)+wrap.after), opts)); le.What != "start tag bytes" {
				t.Errorf("a tag of %d bytes: %v", limit+1, le)
			}
		})
	}
	// Text, comments and CDATA are not tags, however long.
	long := strings.Repeat("y", 10*limit)
	doc := "<r>" + long + "<!--" + long + "--><![CDATA[" + long + "]]></r>"
	if err := Check([]byte(doc), Options{Limits: Limits{StartTagBytes: limit}}); err != nil {
		t.Errorf("long text: %v", err)
	}
}

// allocated returns the bytes f allocated.
func allocated(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHostileDocumentsCostLittle: documents that make encoding/xml (and
// the parsers behind it) spend hundreds of megabytes are refused after a
// bounded amount of work. A bare decoder spends 780 MB on the first one.
func TestHostileDocumentsCostLittle(t *testing.T) {
	const size = 10 << 20
	fill := func(head, unit string) []byte {
		var b bytes.Buffer
		b.WriteString(head)
		for b.Len() < size {
			b.WriteString(unit)
		}
		return b.Bytes()
	}
	limits := Limits{Depth: 256, Nodes: 200_000, StartTagBytes: 64 << 10, Namespaces: 64, TextWork: 1 << 30}
	for _, tt := range []struct {
		name, what string
		body       []byte
	}{
		{"valueless attributes", "start tag bytes", fill("<rss><a", " b")},
		{"open elements", "nesting depth", fill("<rss><channel>", "<a>")},
		{"sibling elements", "elements and attributes", fill("<rss><channel>", "<x:a/>")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			n := allocated(func() {
				err = Check(tt.body, Options{Limits: limits, CharsetReader: charset.NewReaderLabel, DropControlChars: true})
			})
			if le := limitOf(t, err); le.What != tt.what {
				t.Errorf("got %v, want %q", le, tt.what)
			}
			if n > 64<<20 {
				t.Errorf("refusing it allocated %d MiB", n>>20)
			}
			t.Logf("%v after %d MiB allocated", err, n>>20)
		})
	}
}

// FuzzSameTokens: whatever the document, the guard under limits it does
// not reach (its start tag watch armed) sees the tokens and the error a
// bare decoder with the same settings sees, so a check before a parser
// judges what that parser will read.
func FuzzSameTokens(f *testing.F) {
	for _, s := range []string{
		`<?xml version="1.0" encoding="ISO-8859-1"?><rss><a b=c d>caf` + "\xe9" + `</a></rss>`,
		"<rss>\x01<a/>text<![CDATA[x]]><!-- c --><?pi x?></rss>",
		`<!DOCTYPE x [<!ENTITY e "<a>">]><x>&e;</x>`,
		`<a><b></a></b>`,
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 1<<16 {
			return
		}
		opts := feedOptions
		opts.Limits = Limits{StartTagBytes: 1 << 20}
		want, wantErr := plainTokens(body, feedOptions)
		got, gotErr := guardedTokens(body, opts)
		if !reflect.DeepEqual(got, want) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("guard\n%#v, %v\nplain decoder\n%#v, %v", got, gotErr, want, wantErr)
		}
	})
}
