package main

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// chatMessage is a message as a plain Jabber client sees it.
type chatMessage struct {
	XMLName xml.Name `xml:"message"`
	Type    string   `xml:"type,attr"`
	From    string   `xml:"from,attr"`
	Body    string   `xml:"body"`
	// Event is a notification's pubsub#event, which plain notifications
	// do not carry.
	Event *struct{} `xml:"http://jabber.org/protocol/pubsub#event event"`
	// OOB is the XEP-0066 link of a plain notification.
	OOB *struct {
		URL string `xml:"url"`
	} `xml:"jabber:x:oob x"`
}

// nextChat waits for the next message with a body.
func nextChat(t *testing.T, c *testenv.Client, wait time.Duration) chatMessage {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case raw := <-c.Stanzas:
			var m chatMessage
			if xml.Unmarshal(raw, &m) == nil && m.XMLName.Local == "message" && m.Body != "" {
				return m
			}
		case <-deadline:
			t.Fatalf("%s: no message with a body within %s", c.JID, wait)
			return chatMessage{}
		}
	}
}

// TestPlainClientSubscribesByChat is the path of a Jabber client that
// knows nothing of pubsub: it chats with pingd, names a feed's URL, and
// reads the new item's title and link in a message body after a ping.
func TestPlainClientSubscribesByChat(t *testing.T) {
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	p.Register("reader", "pw")
	feed := newFeedServer(t, feedItem{"old-1", "Old one"})
	d := newDaemon(t, p, "PINGD_OPEN_SOURCES=1")
	d.Start(true)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	reader := testenv.Dial(ctx, t, p, "reader", "pw", "phone")
	say := func(body string) chatMessage {
		t.Helper()
		var b strings.Builder
		b.WriteString(fmt.Sprintf(`<message type="chat" to=%q><body>`, p.ComponentDomain))
		if err := xml.EscapeText(&b, []byte(body)); err != nil {
			t.Fatal(err)
		}
		b.WriteString(`</body></message>`)
		if _, err := reader.SendRaw(ctx, b.String()); err != nil {
			t.Fatal(err)
		}
		return nextChat(t, reader, 15*time.Second)
	}

	if m := say("help"); m.Type != "chat" || !strings.Contains(m.Body, "subscribe NODE") {
		t.Fatalf("help answered %+v", m)
	}
	if m := say("frobnicate"); !strings.Contains(m.Body, "subscribe NODE") {
		t.Errorf("a bad command answered %q, want the help text", m.Body)
	}
	feedURL := feed.URL + "/feed.xml"
	if m := say("subscribe " + feedURL); !strings.Contains(m.Body, "Subscribed to") || !strings.Contains(m.Body, "(Test feed)") {
		t.Fatalf("subscribe answered %q", m.Body)
	}
	// The node was created for the feed and its baseline fetched: the
	// feed's entry is the node's item, and the newest is sent at once,
	// under the feed's title.
	d.waitBaselined(feedURL)
	if m := nextChat(t, reader, 15*time.Second); !strings.Contains(m.Body, "[Test feed] Old one") {
		t.Errorf("the newest entry after subscribing: %q", m.Body)
	}
	if m := say("list"); !strings.Contains(m.Body, feedURL) {
		t.Errorf("list answered %q", m.Body)
	}

	feed.Add(feedItem{"new-1", "Fresh news"})
	resp, err := http.PostForm(d.URL+"/ping", url.Values{"url": {feedURL}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("ping: HTTP %d", resp.StatusCode)
	}
	// A plain message every client shows (and servers keep offline): a
	// chat message with the title and link, the link as XEP-0066 too, and
	// no pubsub#event, which some clients drop a message for.
	m := nextChat(t, reader, 20*time.Second)
	if m.Type != "chat" || !strings.Contains(m.Body, "Fresh news") || !strings.Contains(m.Body, "http://127.0.0.1/new-1") {
		t.Fatalf("notification %+v: want a chat message whose body has the title and link", m)
	}
	if m.Event != nil || m.OOB == nil || m.OOB.URL != "http://127.0.0.1/new-1" {
		t.Errorf("notification %+v: want the link as XEP-0066 and no pubsub#event", m)
	}
	if strings.Contains(m.Body, "Old one") {
		t.Errorf("the notification repeats an old item: %q", m.Body)
	}

	if m := say("unsubscribe " + feedURL); !strings.Contains(m.Body, "Unsubscribed") {
		t.Fatalf("unsubscribe answered %q", m.Body)
	}
	if m := say("list"); !strings.Contains(m.Body, "no subscriptions") {
		t.Errorf("list after unsubscribe answered %q", m.Body)
	}
	feed.Add(feedItem{"new-2", "After leaving"})
	resp, err = http.PostForm(d.URL+"/ping", url.Values{"url": {feedURL}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	deadline := time.After(2 * time.Second)
	for {
		select {
		case raw := <-reader.Stanzas:
			if strings.Contains(string(raw), "After leaving") {
				t.Fatalf("notified after unsubscribing: %s", raw)
			}
			continue
		case <-deadline:
		}
		break
	}
}
