package weblogs

import (
	"bytes"
	"encoding/xml"
	"math"
	"testing"
	"time"
)

// TestChangeListParts: the parts make one well-formed weblogUpdates
// document, and the size bounds the ping lists cap documents with hold
// for the longest "updated", "count" and "when" there can be.
func TestChangeListParts(t *testing.T) {
	var b bytes.Buffer
	updated := time.Date(2007, 1, 1, 1, 0, 0, 0, time.UTC)
	WriteStart(&b, updated, 2)
	var name, site bytes.Buffer
	EscapeAttr(&name, `Tom & "Jerry" <3`)
	EscapeAttr(&site, "http://example.org/?a=1&b=2")
	WriteWeblog(&b, name.String(), site.String(), "", 3)
	WriteWeblog(&b, "B", "http://b.example/", "http://b.example/feed", 0)
	WriteEnd(&b)
	var doc struct {
		XMLName xml.Name `xml:"weblogUpdates"`
		Version string   `xml:"version,attr"`
		Updated string   `xml:"updated,attr"`
		Count   int      `xml:"count,attr"`
		Weblogs []struct {
			Name   string `xml:"name,attr"`
			URL    string `xml:"url,attr"`
			RSSURL string `xml:"rssUrl,attr"`
			When   int    `xml:"when,attr"`
		} `xml:"weblog"`
	}
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, b.Bytes())
	}
	if doc.Version != "2" || doc.Updated != "Mon, 01 Jan 2007 01:00:00 GMT" || doc.Count != 2 || len(doc.Weblogs) != 2 ||
		doc.Weblogs[0].Name != `Tom & "Jerry" <3` || doc.Weblogs[0].URL != "http://example.org/?a=1&b=2" || doc.Weblogs[0].When != 3 ||
		doc.Weblogs[0].RSSURL != "" || doc.Weblogs[1].RSSURL != "http://b.example/feed" {
		t.Fatalf("parsed %+v from\n%s", doc, b.Bytes())
	}

	var head bytes.Buffer
	WriteStart(&head, time.Date(99999, 12, 31, 23, 59, 59, 0, time.UTC), math.MinInt64)
	WriteEnd(&head)
	if head.Len() > HeaderSizeMax {
		t.Errorf("an empty list takes %d bytes, HeaderSizeMax is %d", head.Len(), HeaderSizeMax)
	}
	var line bytes.Buffer
	WriteWeblog(&line, "", "", "x", math.MinInt64)
	if line.Len()-len("x") > EntrySizeMax {
		t.Errorf("an entry takes %d bytes besides its name and URLs, EntrySizeMax is %d", line.Len()-1, EntrySizeMax)
	}
}

// TestAnswerRoundTrip: what pingd answers a ping with reads back the same
// where pingd relays pings to others.
func TestAnswerRoundTrip(t *testing.T) {
	for _, flerror := range []bool{false, true} {
		if refused, msg := Refused(Answer(flerror, "Thanks")); refused != flerror || msg != "Thanks" {
			t.Errorf("Refused(Answer(%v)) = %v, %q", flerror, refused, msg)
		}
	}
	for _, v := range []any{nil, true, "flerror", map[string]any{"flerror": "yes"}} {
		if refused, _ := Refused(v); refused {
			t.Errorf("Refused(%#v) = true", v)
		}
	}
}
