package cnws

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pingd/pingd/hub"
)

const (
	cnwsTrue  = `<?xml version="1.0"?><notification version="1.0" xmlns="http://www.owlfish.com/thoughts/cnws-2003-04-08.html"><result><status>true</status></result></notification>`
	cnwsFalse = `<?xml version="1.0"?><notification version="1.0" xmlns="http://www.owlfish.com/thoughts/cnws-2003-04-08.html"><result><status>false</status></result></notification>`
)

// resourceChange is the part of a CNWS notification the tests read.
type resourceChange struct {
	XMLName xml.Name `xml:"http://www.owlfish.com/thoughts/cnws-2003-04-08.html notification"`
	Version string   `xml:"version,attr"`
	Change  struct {
		ResourceID  string `xml:"resourceID"`
		ChangeTime  string `xml:"changeTime"`
		Title       string `xml:"title"`
		Description string `xml:"description"`
	} `xml:"resourceChange"`
}

func subscribeDoc(resource, callback string) string {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0"?><notification version="1.0" xmlns="` + Namespace + `"><subscribe><resourceID>`)
	_ = xml.EscapeText(&b, []byte(resource))
	b.WriteString(`</resourceID><notificationURL>`)
	_ = xml.EscapeText(&b, []byte(callback))
	b.WriteString(`</notificationURL></subscribe></notification>`)
	return b.String()
}

func changeDoc(resource, title, desc string) string {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0"?><notification version="1.0" xmlns="` + Namespace + `"><resourceChange><resourceID>`)
	_ = xml.EscapeText(&b, []byte(resource))
	b.WriteString(`</resourceID><changeTime>Mon, 07 Apr 2003 22:59:33 BST</changeTime>`)
	if title != "" {
		b.WriteString(`<title>`)
		_ = xml.EscapeText(&b, []byte(title))
		b.WriteString(`</title>`)
	}
	if desc != "" {
		b.WriteString(`<description>`)
		_ = xml.EscapeText(&b, []byte(desc))
		b.WriteString(`</description>`)
	}
	b.WriteString(`</resourceChange></notification>`)
	return b.String()
}

func TestEncodeChange(t *testing.T) {
	body, err := EncodeChange(Change{
		ResourceID: "http://example.org/?a=1&b=2", ChangeTime: time.Date(2003, 4, 7, 21, 59, 33, 0, time.UTC),
		Title: "<Tom & Jerry>", Description: "",
	})
	if err != nil {
		t.Fatal(err)
	}
	var rc resourceChange
	if err := xml.Unmarshal(body, &rc); err != nil {
		t.Fatal(err)
	}
	if rc.Change.ResourceID != "http://example.org/?a=1&b=2" || rc.Change.Title != "<Tom & Jerry>" ||
		rc.Change.ChangeTime != "Mon, 07 Apr 2003 21:59:33 GMT" || strings.Contains(string(body), "<description>") {
		t.Fatalf("encoded %s", body)
	}
	if _, err := EncodeChange(Change{ResourceID: "javascript:alert(1)"}); err == nil {
		t.Fatal("a resourceID that is no http URL was encoded")
	}
}

func TestDecodeStatus(t *testing.T) {
	for body, want := range map[string][2]bool{
		cnwsTrue:  {true, true},
		cnwsFalse: {false, true},
		`<notification><result><status> FALSE </status></result></notification>`: {false, true},
		`<result><status>true</status></result>`:                                 {true, true},
		`<notification><result><status>maybe</status></result></notification>`:   {false, false},
		`<notification><status>false</status></notification>`:                    {false, false},
		`OK`: {false, false},
		``:   {false, false},
		`<!DOCTYPE x [<!ENTITY f "false">]><result><status>&f;</status></result>`: {false, false},
	} {
		status, ok := DecodeStatus([]byte(body))
		if status != want[0] || ok != want[1] {
			t.Errorf("DecodeStatus(%q) = %v, %v; want %v, %v", body, status, ok, want[0], want[1])
		}
	}
}

func FuzzDecodeStatus(f *testing.F) {
	f.Add([]byte(cnwsTrue))
	f.Add([]byte(cnwsFalse))
	f.Fuzz(func(t *testing.T, body []byte) {
		status, ok := DecodeStatus(body)
		if status && !ok {
			t.Fatal("a status without ok")
		}
	})
}

func TestDecode(t *testing.T) {
	// No namespace (early clients), an extension element and attribute,
	// a non-UTF-8 encoding, a title of exactly 255 characters.
	title := strings.Repeat("é", 255)
	latin1 := []byte(`<?xml version="1.0" encoding="ISO-8859-1"?><notification version="1.0"><resourceChange xmlns:x="urn:x">` +
		`<resourceID> http://example.org/ </resourceID><x:extra><x:deep>ignored</x:deep></x:extra><title>`)
	for range 255 {
		latin1 = append(latin1, 0xE9)
	}
	latin1 = append(latin1, []byte(`</title><description>caf`+"\xe9"+`</description></resourceChange></notification>`)...)
	req, err := Decode(bytes.NewReader(latin1), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if req.Change == nil || req.Change.ResourceID != "http://example.org/" || req.Change.Title != title ||
		req.Change.Description != "café" || !req.Change.HasText || req.Subscribe != nil {
		t.Fatalf("decoded %+v", req.Change)
	}
	req, err = Decode(strings.NewReader(subscribeDoc("http://a.example/", "http://b.example:8888/")), 1<<20)
	if err != nil || req.Subscribe == nil || req.Subscribe.NotificationURL != "http://b.example:8888/" {
		t.Fatalf("subscribe %+v %v", req.Subscribe, err)
	}
	if _, err := Decode(strings.NewReader(changeDoc("http://a/", "", strings.Repeat("d", 100))), 50); !errors.Is(err, ErrInvalid) {
		t.Fatalf("over the size limit: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(subscribeDoc("http://news.bbc.co.uk/", "http://test.server.com:8888/")))
	f.Add([]byte(changeDoc("http://news.bbc.co.uk/", "Title of the change", "A description of the change")))
	f.Add([]byte(`<notification><resourceChange><resourceID>http://x/</resourceID><y:z xmlns:y="u"><q/></y:z></resourceChange></notification>`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		req, err := Decode(bytes.NewReader(doc), 1<<16)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		switch {
		case req.Change != nil && req.Subscribe == nil:
			if hub.ValidURL(req.Change.ResourceID) != nil || utf8.RuneCountInString(req.Change.Title) > MaxTitleRunes {
				t.Fatalf("accepted %+v", req.Change)
			}
			if !utf8.ValidString(req.Change.Title) || !utf8.ValidString(req.Change.Description) {
				t.Fatal("invalid UTF-8 accepted")
			}
			// Kept extensions are well-formed XML elements on their own.
			if ext := req.Change.Extensions; ext != "" {
				d := xml.NewDecoder(strings.NewReader("<x>" + ext + "</x>"))
				for {
					_, err := d.Token()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatalf("extensions %q do not parse: %v", ext, err)
					}
				}
			}
		case req.Subscribe != nil && req.Change == nil:
			if hub.ValidURL(req.Subscribe.ResourceID) != nil || hub.ValidURL(req.Subscribe.NotificationURL) != nil {
				t.Fatalf("accepted %+v", req.Subscribe)
			}
		default:
			t.Fatalf("decoded %+v", req)
		}
	})
}
