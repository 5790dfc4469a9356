package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/internal/testenv"
)

// diffMessage is the part of a notification with a patch the test reads.
type diffMessage struct {
	XMLName xml.Name `xml:"message"`
	Event   *struct {
		Items struct {
			Items []struct {
				ID string `xml:"id,attr"`
			} `xml:"item"`
		} `xml:"items"`
	} `xml:"http://jabber.org/protocol/pubsub#event event"`
	Diff *struct {
		Type  string `xml:"type,attr"`
		Patch string `xml:",chardata"`
	} `xml:"http://getpingd.com/extensions/xmpp/getpingd-1.0 Diff"`
}

// updatedElement is an <updated> element. The feed's own changes with the
// node, and a patch leaves it as it was; the compared documents' entries
// have the same ones.
var updatedElement = regexp.MustCompile(`<updated>[^<]*</updated>`)

// betweenTags is white space between tags, which a patch places
// differently from a rendered document.
var betweenTags = regexp.MustCompile(`>\s+<`)

// TestXMPPDiffsEndToEnd: an XMPP subscriber asking for diffs with the
// x-pingd#diff subscription option gets, with the pubsub event of a new
// entry of the node's feed, the patch that turns the node's Atom document
// (/atom/{node}) as it was into the document as it is.
func TestXMPPDiffsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	p.Register("reader", "pw")
	src := newFeedServer(t, feedItem{"old", "Old"})
	d := newDaemon(t, p)
	d.Start(true)
	if code := d.api("POST", "/api/nodes", map[string]string{"node": "news", "source": src.URL, "title": "News"}, nil); code != 201 {
		t.Fatalf("create: HTTP %d", code)
	}
	d.waitBaselined("news")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	reader := testenv.Dial(ctx, t, p, "reader", "pw", "e2e")
	resp, err := reader.SendRaw(ctx, fmt.Sprintf(`<iq type="set" to="%s" id="sub1"><pubsub xmlns="http://jabber.org/protocol/pubsub">`+
		`<subscribe node="news" jid="%s"/><options><x xmlns="jabber:x:data" type="submit">`+
		`<field var="FORM_TYPE" type="hidden"><value>http://jabber.org/protocol/pubsub#subscribe_options</value></field>`+
		`<field var="x-pingd#diff"><value>application/patch-ops+xml</value></field></x></options></pubsub></iq>`,
		p.ComponentDomain, reader.JID.Bare()))
	if err != nil || !strings.Contains(resp, `subscription="subscribed"`) {
		t.Fatalf("subscribe with diffs: %s, %v", resp, err)
	}
	next := func() diffMessage {
		t.Helper()
		timeout := time.After(15 * time.Second)
		for {
			select {
			case raw := <-reader.Stanzas:
				var m diffMessage
				if xml.Unmarshal(raw, &m) == nil && m.Event != nil {
					return m
				}
			case <-timeout:
				t.Fatal("no notification")
			}
		}
	}

	atom := func() []byte {
		t.Helper()
		resp, err := http.Get(d.URL + "/atom/news")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("/atom/news: HTTP %d, %v", resp.StatusCode, err)
		}
		return b
	}
	// The node's newest item (its feed's entry at the first fetch) comes
	// first, sent to the new subscription.
	if m := next(); len(m.Event.Items.Items) != 1 {
		t.Fatalf("the newest item sent on subscribing: %+v", m)
	}
	before := atom()
	src.Add(feedItem{"new", "New entry"})
	d.pingFeed(src.URL)
	m := next()
	if len(m.Event.Items.Items) != 1 || m.Diff == nil || m.Diff.Type != "application/patch-ops+xml" {
		t.Fatalf("the notification of the new entry: %+v, want one item and its patch", m)
	}
	patched, err := feed.ApplyPatch(before, []byte(m.Diff.Patch))
	if err != nil {
		t.Fatalf("apply %s: %v", m.Diff.Patch, err)
	}
	after := atom()
	normal := func(doc []byte) []byte {
		return betweenTags.ReplaceAll(bytes.TrimSpace(updatedElement.ReplaceAll(doc, nil)), []byte("><"))
	}
	if !bytes.Contains(patched, []byte("New entry")) || !bytes.Equal(normal(patched), normal(after)) {
		t.Errorf("the patch made\n%s\nof /atom/news as it was, want it as it is\n%s", patched, after)
	}
}
