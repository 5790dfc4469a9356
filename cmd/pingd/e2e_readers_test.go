package main

import (
	"context"
	"encoding/xml"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// Readers on real Jabber clients: the terminal client Profanity, and a
// plain client that is offline when the entries come, each against
// Prosody and against ejabberd, with the pingd binary between a feed and
// them.

// readerServer is one XMPP server the reader tests run against.
type readerServer struct {
	name     string
	x        xmppServer
	c2s      string
	register func(user, password string) string
	dial     func(ctx context.Context, t testing.TB, user, password, resource string) *testenv.Client
}

// readerServers starts one server of each kind, one after the other as
// each subtest asks: a private Prosody, and a private ejabberd that keeps
// offline messages.
func readerServers() []struct {
	name  string
	start func(t *testing.T) readerServer
} {
	return []struct {
		name  string
		start func(t *testing.T) readerServer
	}{
		{"prosody", func(t *testing.T) readerServer {
			p := testenv.StartProsody(t, testenv.ProsodyOptions{})
			return readerServer{name: "prosody", x: prosodyServer(p), c2s: p.C2SAddr, register: p.Register,
				dial: func(ctx context.Context, t testing.TB, user, password, resource string) *testenv.Client {
					return testenv.Dial(ctx, t, p, user, password, resource)
				}}
		}},
		{"ejabberd", func(t *testing.T) readerServer {
			e := testenv.StartEjabberd(t, testenv.EjabberdOptions{Offline: true, LogLevel: "warning"})
			return readerServer{name: "ejabberd", x: xmppServer{e.ComponentAddr, e.ComponentDomain, e.Secret, e.Domain}, c2s: e.C2SAddr,
				register: func(user, password string) string { return e.Register(user, password) },
				dial:     e.Dial}
		}},
	}
}

// readerSetup is pingd following a feed with one node, "demo".
type readerSetup struct {
	srv  readerServer
	d    *daemon
	feed *feedServer
}

func newReaderSetup(t *testing.T, srv readerServer) *readerSetup {
	t.Helper()
	feed := newFeedServer(t, feedItem{"old-1", "An old entry"})
	d := newInstance(t, srv.x, filepath.Join(t.TempDir(), "pingd.db"))
	d.Start(true)
	if code := d.api("POST", "/api/nodes", map[string]string{"node": "demo", "source": feed.URL + "/feed.xml", "title": "Demo"}, nil); code != 201 {
		t.Fatalf("create node: HTTP %d", code)
	}
	d.waitBaselined("demo")
	return &readerSetup{srv: srv, d: d, feed: feed}
}

// publish adds an entry to the feed and pings pingd.
func (r *readerSetup) publish(guid, title string) {
	r.feed.Add(feedItem{guid, title})
	r.d.pingSource(r.feed.URL + "/feed.xml")
}

// waitSent waits until the XMPP server has taken every notification of
// the node (its cursor caught up with its log).
func (r *readerSetup) waitSent(minSeq int64) {
	var st struct {
		LastSeq int64 `json:"last_seq"`
		XMPPSeq int64 `json:"xmpp_seq"`
	}
	testenv.WaitFor(r.d.t, 20*time.Second, "the notifications to be taken by the XMPP server", func() bool {
		return r.d.api("GET", "/api/nodes/demo/status", nil, &st) == 200 && st.LastSeq >= minSeq && st.XMPPSeq == st.LastSeq
	})
}

// TestProfanityShowsEntries: a reader logs in with Profanity, subscribes
// by chat, and the title of the entry the feed gets next appears on
// Profanity's screen. (Profanity shows nothing of a message that carries
// a pubsub#event, whatever its type: readers get plain messages.) When the
// admin API makes the node whitelist-only, the end of the subscription
// shows too.
func TestProfanityShowsEntries(t *testing.T) {
	testenv.RequireProfanity(t)
	for _, s := range readerServers() {
		t.Run(s.name, func(t *testing.T) {
			srv := s.start(t)
			r := newReaderSetup(t, srv)
			jid := srv.register("reader", "pw")
			prof := testenv.StartProfanity(t, srv.c2s, jid, "pw")

			// A word pingd does not know is answered in a sentence, with the
			// commands on one line.
			prof.Type("/msg " + srv.x.Domain + " frobnicate")
			prof.WaitFor("I did not understand", 20*time.Second)
			prof.Type("/msg " + srv.x.Domain + " subscribe demo")
			prof.WaitFor(`Subscribed to "demo"`, 20*time.Second)

			r.publish("new-1", "Fresh from the feed")
			screen := prof.WaitFor("Fresh from the feed", 20*time.Second)
			if !strings.Contains(screen, "http://127.0.0.1/new-1") {
				t.Errorf("Profanity shows the title but not the link:\n%s", screen)
			}
			// A burst is one message: its heading and every title show.
			r.feed.Add(feedItem{"b-1", "Burst one"}, feedItem{"b-2", "Burst two"}, feedItem{"b-3", "Burst three"}, feedItem{"b-4", "Burst four"})
			r.d.pingSource(r.feed.URL + "/feed.xml")
			screen = prof.WaitFor("4 new entries", 20*time.Second)
			for _, title := range []string{"Burst one", "Burst four"} {
				if !strings.Contains(screen, title) {
					t.Errorf("Profanity shows the burst without %q:\n%s", title, screen)
				}
			}
			if code := r.d.api("PATCH", "/api/nodes/demo", map[string]string{"access_model": "whitelist"}, nil); code != 200 {
				t.Fatalf("make the node whitelist-only: HTTP %d", code)
			}
			prof.WaitFor("[Demo] Your subscription to this node has ended", 20*time.Second)
		})
	}
}

// TestOfflineReaderGetsEntries: a reader subscribes by chat with a plain
// client and logs out; two entries arrive while it is offline; when it
// logs in again, both come (its server kept the chat messages).
func TestOfflineReaderGetsEntries(t *testing.T) {
	for _, s := range readerServers() {
		t.Run(s.name, func(t *testing.T) {
			srv := s.start(t)
			r := newReaderSetup(t, srv)
			srv.register("reader", "pw")
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()

			c := srv.dial(ctx, t, "reader", "pw", "phone")
			if _, err := c.SendRaw(ctx, fmt.Sprintf(`<message type="chat" to=%q><body>subscribe demo</body></message>`, srv.x.Domain)); err != nil {
				t.Fatal(err)
			}
			if m := nextChat(t, c, 20*time.Second); !strings.Contains(m.Body, `Subscribed to "demo"`) {
				t.Fatalf("subscribe answered %q", m.Body)
			}
			c.Close()

			r.publish("away-1", "While you were away")
			r.waitSent(1)
			r.publish("away-2", "Still away")
			r.waitSent(2)

			back := srv.dial(ctx, t, "reader", "pw", "laptop")
			want := map[string]bool{"While you were away": false, "Still away": false}
			deadline := time.After(20 * time.Second)
			for got := 0; got < len(want); {
				select {
				case raw := <-back.Stanzas:
					var m chatMessage
					if xml.Unmarshal(raw, &m) != nil || m.Body == "" {
						continue
					}
					for title, seen := range want {
						if !seen && strings.Contains(m.Body, title) {
							want[title] = true
							got++
							if m.Type != "chat" || m.Event != nil {
								t.Errorf("the kept notification %+v, want a plain chat message", m)
							}
						}
					}
				case <-deadline:
					t.Fatalf("after logging in again the reader got %v", want)
				}
			}
		})
	}
}
