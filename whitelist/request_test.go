package whitelist

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pingd/pingd/internal/getpingd"
)

func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string
		action Action
		jid    string
		err    error // nil: accepted
	}{
		// Good.
		{"proposal sample", "<subscribe>\n<consumer jid=\"listener@example.com/FeedListener\" />\n</subscribe>", Subscribe, "listener@example.com", nil},
		{"unsubscribe", `<unsubscribe><consumer jid="listener@example.com"/></unsubscribe>`, Unsubscribe, "listener@example.com", nil},
		{"xml declaration", `<?xml version="1.0" encoding="UTF-8"?><subscribe><consumer jid="a@b.example"/></subscribe>`, Subscribe, "a@b.example", nil},
		{"normalised", `<subscribe><consumer jid="Juliet@EXAMPLE.com/Balcony"/></subscribe>`, Subscribe, "juliet@example.com", nil},
		{"fullwidth width-mapped", `<subscribe><consumer jid="ｊｕｌｉｅｔ@example.com"/></subscribe>`, Subscribe, "juliet@example.com", nil},
		{"unicode localpart", `<subscribe><consumer jid="Σίσυφος@example.com"/></subscribe>`, Subscribe, "σίσυφος@example.com", nil},
		{"domain JID", `<subscribe><consumer jid="feeds.example.net"/></subscribe>`, Subscribe, "feeds.example.net", nil},
		{"escaped in XML", `<subscribe><consumer jid="a&#64;b.example/r&amp;d"/></subscribe>`, Subscribe, "a@b.example", nil},
		{"spaces around the jid", `<subscribe><consumer jid="  a@b.example  "/></subscribe>`, Subscribe, "a@b.example", nil},
		{"namespace tolerated", `<subscribe xmlns="http://getpingd.com/core/getpingd-1.0"><consumer jid="a@b.example"/></subscribe>`, Subscribe, "a@b.example", nil},
		{"prefixed namespace", `<g:subscribe xmlns:g="urn:x"><g:consumer jid="a@b.example"/></g:subscribe>`, Subscribe, "a@b.example", nil},
		{"extension skipped", `<subscribe><note>hi<consumer jid="x@y"/></note><other:consumer xmlns:other="urn:o" jid="z@z"/><consumer jid="a@b.example"/></subscribe>`, Subscribe, "a@b.example", nil},
		{"comments and PIs", `<!-- c --><subscribe><?pi x?><consumer jid="a@b.example"/><!-- c --></subscribe><!-- after -->`, Subscribe, "a@b.example", nil},
		{"BOM", "\uFEFF<subscribe><consumer jid=\"a@b.example\"/></subscribe>", Subscribe, "a@b.example", nil},

		// Bad documents.
		{"empty", ``, "", "", ErrMalformed},
		{"whitespace", "  \n ", "", "", ErrMalformed},
		{"not XML", `jid=a@b.example`, "", "", ErrMalformed},
		{"wrong root", `<subscription><consumer jid="a@b.example"/></subscription>`, "", "", ErrMalformed},
		{"no consumer", `<subscribe></subscribe>`, "", "", ErrMalformed},
		{"consumer in another namespace", `<subscribe xmlns="urn:a"><consumer xmlns="urn:b" jid="a@b.example"/></subscribe>`, "", "", ErrMalformed},
		{"two consumers", `<subscribe><consumer jid="a@b.example"/><consumer jid="c@d.example"/></subscribe>`, "", "", ErrMalformed},
		{"missing jid", `<subscribe><consumer/></subscribe>`, "", "", ErrMalformed},
		{"namespaced jid attribute only", `<subscribe xmlns:x="urn:x"><consumer x:jid="a@b.example"/></subscribe>`, "", "", ErrMalformed},
		{"two roots", `<subscribe><consumer jid="a@b.example"/></subscribe><subscribe/>`, "", "", ErrMalformed},
		{"text after root", `<subscribe><consumer jid="a@b.example"/></subscribe>trailing`, "", "", ErrMalformed},
		{"text before root", `junk<subscribe><consumer jid="a@b.example"/></subscribe>`, "", "", ErrMalformed},
		{"unclosed", `<subscribe><consumer jid="a@b.example"/>`, "", "", ErrMalformed},
		{"mismatched", `<subscribe><consumer jid="a@b.example"></subscribe></consumer>`, "", "", ErrMalformed},
		{"unquoted attribute", `<subscribe><consumer jid=a@b.example/></subscribe>`, "", "", ErrMalformed},
		{"duplicate attribute", `<subscribe><consumer jid="a@b.example" jid="c@d.example"/></subscribe>`, "", "", ErrMalformed},
		{"other encoding", `<?xml version="1.0" encoding="ISO-8859-1"?><subscribe><consumer jid="a@b.example"/></subscribe>`, "", "", ErrMalformed},
		{"invalid UTF-8", "<subscribe><consumer jid=\"a\xff@b.example\"/></subscribe>", "", "", ErrMalformed},
		{"invalid UTF-8 in a comment", "<subscribe><!-- \xc3\x28 --><consumer jid=\"a@b.example\"/></subscribe>", "", "", ErrMalformed},
		{"NUL character reference", `<subscribe><consumer jid="a&#0;@b.example"/></subscribe>`, "", "", ErrMalformed},
		{"control character", "<subscribe><consumer jid=\"a\x01@b.example\"/></subscribe>", "", "", ErrMalformed},

		// Hostile.
		{"DOCTYPE", `<!DOCTYPE subscribe><subscribe><consumer jid="a@b.example"/></subscribe>`, "", "", ErrMalformed},
		{"billion laughs", `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]><subscribe><consumer jid="&lol2;@b.example"/></subscribe>`, "", "", ErrMalformed},
		{"external entity", `<!DOCTYPE s [<!ENTITY x SYSTEM "file:///etc/passwd">]><subscribe><consumer jid="&x;"/></subscribe>`, "", "", ErrMalformed},
		{"undeclared entity", `<subscribe><consumer jid="&x;@b.example"/></subscribe>`, "", "", ErrMalformed},
		{"entity in text", `<subscribe>&lol;<consumer jid="a@b.example"/></subscribe>`, "", "", ErrMalformed},
		{"deep nesting", "<subscribe>" + strings.Repeat("<a>", 1000) + strings.Repeat("</a>", 1000) + `<consumer jid="a@b.example"/></subscribe>`, "", "", ErrMalformed},
		{"deep nesting unclosed", strings.Repeat("<subscribe>", 5000), "", "", ErrMalformed},

		// Bad JIDs: the reason is given.
		{"empty jid", `<subscribe><consumer jid=""/></subscribe>`, "", "", ErrBadJID},
		{"blank jid", `<subscribe><consumer jid="   "/></subscribe>`, "", "", ErrBadJID},
		{"empty localpart", `<subscribe><consumer jid="@b.example"/></subscribe>`, "", "", ErrBadJID},
		{"empty domain", `<subscribe><consumer jid="a@"/></subscribe>`, "", "", ErrBadJID},
		{"empty resource", `<subscribe><consumer jid="a@b.example/"/></subscribe>`, "", "", ErrBadJID},
		{"space in localpart", `<subscribe><consumer jid="a b@c.example"/></subscribe>`, "", "", ErrBadJID},
		{"two at signs", `<subscribe><consumer jid="a@b@c.example"/></subscribe>`, "", "", ErrBadJID},
		{"forbidden localpart characters", `<subscribe><consumer jid="&quot;a&lt;&gt;&quot;@c.example"/></subscribe>`, "", "", ErrBadJID},
		{"bad domain label", `<subscribe><consumer jid="a@-b.example"/></subscribe>`, "", "", ErrBadJID},
		{"localpart too long", `<subscribe><consumer jid="` + strings.Repeat("a", 1024) + `@b.example"/></subscribe>`, "", "", ErrBadJID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseConsumerRequest(strings.NewReader(tc.body))
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v (request %+v)", err, tc.err, req)
				}
				if req != (Request{}) {
					t.Errorf("a rejected request came with %+v", req)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseConsumerRequest: %v", err)
			}
			if req.Action != tc.action || req.JID != tc.jid {
				t.Errorf("got %+v, want %s %s", req, tc.action, tc.jid)
			}
		})
	}
}

func TestParseRequestSaysWhyAJIDIsBad(t *testing.T) {
	for body, reason := range map[string]string{
		`<subscribe><consumer jid=""/></subscribe>`:              "empty",
		`<subscribe><consumer jid="@b.example"/></subscribe>`:    "localpart",
		`<subscribe><consumer jid="a@"/></subscribe>`:            "domainpart",
		`<subscribe><consumer jid="a@b/"/></subscribe>`:          "resourcepart",
		`<subscribe><consumer jid="a b@c.example"/></subscribe>`: "disallowed",
	} {
		_, err := ParseConsumerRequest(strings.NewReader(body))
		if !errors.Is(err, ErrBadJID) || !strings.Contains(err.Error(), reason) {
			t.Errorf("%s: err = %v, want ErrBadJID saying %q", body, err, reason)
		}
	}
}

func TestParseRequestSizeCap(t *testing.T) {
	doc := func(n int) string {
		// Padding in a comment keeps the document valid at any size.
		head := `<subscribe><consumer jid="a@b.example"/><!--`
		tail := `--></subscribe>`
		return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	}
	if req, err := ParseConsumerRequest(strings.NewReader(doc(getpingd.MaxRequestBytes))); err != nil || req.JID != "a@b.example" {
		t.Fatalf("document of exactly the cap: %+v, %v", req, err)
	}
	if _, err := ParseConsumerRequest(strings.NewReader(doc(getpingd.MaxRequestBytes + 1))); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("one byte over the cap: err = %v, want ErrTooLarge", err)
	}
	// A huge stream is not read to its end.
	huge := &countingReader{r: io.MultiReader(strings.NewReader("<subscribe>"), zeroes{})}
	if _, err := ParseConsumerRequest(huge); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("endless body: err = %v", err)
	}
	if huge.n > getpingd.MaxRequestBytes+32*1024 {
		t.Errorf("read %d bytes of an endless body", huge.n)
	}
}

func TestParseRequestUnderACallersCap(t *testing.T) {
	body := `<subscribe><consumer jid="a@b.example"/><!--` + strings.Repeat("x", 1000) + `--></subscribe>`
	rec := httptest.NewRecorder()
	r := http.MaxBytesReader(rec, io.NopCloser(strings.NewReader(body)), 100)
	if _, err := ParseConsumerRequest(r); !errors.Is(err, ErrTooLarge) {
		t.Errorf("err = %v, want ErrTooLarge", err)
	}
	failing := io.MultiReader(strings.NewReader("<subscribe>"), errReader{})
	if _, err := ParseConsumerRequest(failing); err == nil || errors.Is(err, ErrMalformed) || errors.Is(err, ErrTooLarge) {
		t.Errorf("read error: err = %v, want the read error itself", err)
	}
}

type zeroes struct{}

func (zeroes) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func FuzzParseConsumerRequest(f *testing.F) {
	f.Add([]byte(`<subscribe><consumer jid="listener@example.com/FeedListener"/></subscribe>`))
	f.Add([]byte(`<unsubscribe xmlns="urn:x"><consumer jid="A@B"/></unsubscribe>`))
	f.Add([]byte(`<!DOCTYPE a [<!ENTITY b "c">]><subscribe><consumer jid="&b;@d"/></subscribe>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseConsumerRequest(bytes.NewReader(body))
		if err != nil {
			if req != (Request{}) {
				t.Fatalf("error %v with request %+v", err, req)
			}
			return
		}
		if req.Action != Subscribe && req.Action != Unsubscribe {
			t.Fatalf("action %q", req.Action)
		}
		// An accepted JID is a normalised bare JID: valid UTF-8, no
		// resource, and a fixed point of normalisation.
		if !utf8.ValidString(req.JID) || strings.Contains(req.JID, "/") {
			t.Fatalf("JID %q", req.JID)
		}
		again, err := BareJID(req.JID)
		if err != nil || again != req.JID {
			t.Fatalf("JID %q normalises to %q, %v", req.JID, again, err)
		}
		// The answer document carries it back unchanged.
		var ans struct {
			JID string `xml:"jid,attr"`
		}
		if err := xml.Unmarshal(getpingd.SubscribedDocument(req.JID, "n"), &ans); err != nil || ans.JID != req.JID {
			t.Fatalf("answer for %q: %q, %v", req.JID, ans.JID, err)
		}
	})
}
