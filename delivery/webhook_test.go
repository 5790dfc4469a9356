package delivery

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mmcdole/gofeed"

	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/getpingd"
	"github.com/pingd/pingd/internal/testenv"
)

func TestVerificationOfIntent(t *testing.T) {
	t.Run("echo activates", func(t *testing.T) {
		h := newHarness(t)
		rcv := newReceiver(t, h.clock)
		id := h.subscribe(rcv.URL("/hook?feed=news"), hub.SubPending, hub.Options{})
		testenv.WaitFor(t, 15*time.Second, "verification", func() bool { s := h.sub(id); return s != nil && s.State == hub.SubActive })
		checks := rcv.verifications()
		if len(checks) != 1 {
			t.Fatalf("%d verification requests", len(checks))
		}
		q := checks[0].Query
		if q.Get("hub.mode") != "subscribe" || q.Get("hub.topic") != testDescriptor || len(q.Get("hub.challenge")) < 16 ||
			q.Get("feed") != "news" || checks[0].UserAgent != "pingd/test" {
			t.Errorf("verification request %v, user agent %q", q, checks[0].UserAgent)
		}
		// Delivered from now on.
		h.publish("a")
		testenv.WaitFor(t, 15*time.Second, "a delivery", func() bool { return len(rcv.deliveries("")) == 1 })
		if len(rcv.deliveries("")) != 1 {
			t.Error("no delivery after verification")
		}
	})

	// A subscription no one confirms is dropped: a wrong echo, or the
	// right one with an error status.
	for name, echo := range map[string]func(string) (int, string){
		"wrong echo":     func(string) (int, string) { return http.StatusOK, "not the challenge" },
		"empty echo":     func(string) (int, string) { return http.StatusOK, "" },
		"non-2xx":        func(c string) (int, string) { return http.StatusNotFound, c },
		"server error":   func(c string) (int, string) { return http.StatusInternalServerError, c },
		"challenge+junk": func(c string) (int, string) { return http.StatusOK, c + "x" },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			rcv := newReceiver(t, h.clock)
			rcv.set(func(r *receiver) { r.echo = echo })
			id := h.subscribe(rcv.URL("/hook"), hub.SubPending, hub.Options{})
			testenv.WaitFor(t, 15*time.Second, "the subscription to be dropped", func() bool { return h.sub(id) == nil })
			if n := len(rcv.verifications()); n != 1 {
				t.Errorf("%d verification requests", n)
			}
			h.publish("a")
			h.engine.Wake(0)
			if n := len(rcv.deliveries("")); n != 0 {
				t.Errorf("%d deliveries to a dropped subscription", n)
			}
		})
	}

	t.Run("unsubscribe", func(t *testing.T) {
		h := newHarness(t)
		rcv := newReceiver(t, h.clock)
		confirm := newReceiver(t, h.clock)
		refuse := newReceiver(t, h.clock)
		refuse.set(func(r *receiver) { r.echo = func(string) (int, string) { return http.StatusNotFound, "" } })
		ctx := context.Background()
		var ids []int64
		for _, r := range []*receiver{confirm, refuse} {
			id := h.subscribe(r.URL("/hook"), hub.SubActive, hub.Options{Secret: "k"})
			s := h.sub(id)
			if err := h.hub.SetSubscriptionState(ctx, s, hub.SubUnsubscribing); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		testenv.WaitFor(t, 15*time.Second, "the confirmed unsubscription", func() bool { return h.sub(ids[0]) == nil })
		if q := confirm.verifications()[0].Query; q.Get("hub.mode") != "unsubscribe" || q.Get("hub.topic") != testDescriptor {
			t.Errorf("unsubscribe verification %v", q)
		}
		// Not confirmed: the subscription stays, active, with its options.
		testenv.WaitFor(t, 15*time.Second, "the refused unsubscription", func() bool { s := h.sub(ids[1]); return s.State == hub.SubActive })
		if s := h.sub(ids[1]); s.Options.Secret != "k" {
			t.Errorf("options lost: %+v", s.Options)
		}
		_ = rcv
	})
}

func TestDeliveryMethodsAndSignature(t *testing.T) {
	h := newHarness(t)
	rcv := newReceiver(t, h.clock)
	const secret = "s3cr3t"
	h.subscribe(rcv.URL("/post"), hub.SubActive, hub.Options{Method: getpingd.WebhookMethodPost, Diff: getpingd.DiffNone})
	h.subscribe(rcv.URL("/notify"), hub.SubActive, hub.Options{Method: getpingd.WebhookMethodNotify, Diff: getpingd.DiffNone, Secret: secret})
	h.subscribe(rcv.URL("/default"), hub.SubActive, hub.Options{})
	h.publish("one", "two")
	testenv.WaitFor(t, 15*time.Second, "three deliveries", func() bool { return len(rcv.deliveries("")) == 3 })

	for path, method := range map[string]string{"/post": "POST", "/notify": "NOTIFY", "/default": "POST"} {
		ds := rcv.deliveries(path)
		if len(ds) != 1 {
			t.Fatalf("%s: %d deliveries", path, len(ds))
		}
		d := ds[0]
		if d.Method != method || d.ContentType != "application/atom+xml" {
			t.Errorf("%s: %s %q", path, d.Method, d.ContentType)
		}
		if !strings.Contains(d.Link, "<"+testHub+`>; rel="hub"`) || !strings.Contains(d.Link, "<"+testDescriptor+`>; rel="self"`) {
			t.Errorf("%s: Link %q", path, d.Link)
		}
		f, err := gofeed.NewParser().Parse(bytes.NewReader(d.Body))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var ids, titles []string
		for _, it := range f.Items {
			ids = append(ids, it.GUID)
			titles = append(titles, it.Title)
		}
		if !slices.Equal(ids, []string{feed.AtomID("two"), feed.AtomID("one")}) || !slices.Equal(titles, []string{"Title two", "Title one"}) {
			t.Errorf("%s: entries %v %v, want only the new ones, newest first", path, ids, titles)
		}
		if f.Title != "News" {
			t.Errorf("%s: feed title %q", path, f.Title)
		}
	}

	// The signature is the HMAC-SHA256 of the body under the secret.
	d := rcv.deliveries("/notify")[0]
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(d.Body)
	if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); d.Signature != want {
		t.Errorf("X-Hub-Signature %q, want %q", d.Signature, want)
	}
	wrong := hmac.New(sha256.New, []byte("other"))
	wrong.Write(d.Body)
	if d.Signature == "sha256="+hex.EncodeToString(wrong.Sum(nil)) {
		t.Error("the signature does not depend on the secret")
	}
	for _, path := range []string{"/post", "/default"} {
		if sig := rcv.deliveries(path)[0].Signature; sig != "" {
			t.Errorf("%s: signed without a secret: %q", path, sig)
		}
	}
}

// TestWebhookFeedDescribesTheNode: a webhook's Atom document describes
// the node as its own feed /atom/{node} does: that feed's id and self
// link, the hub, the GetPingd descriptor and the owner's polling hints.
func TestWebhookFeedDescribesTheNode(t *testing.T) {
	h := newHarness(t)
	cfg := hub.DefaultNodeConfig()
	cfg.Title = "News"
	cfg.Polling = hub.FeedPolling{UpdatePeriod: "hourly", UpdateFrequency: 2}
	if err := h.hub.ConfigureNode(context.Background(), "news", cfg); err != nil {
		t.Fatal(err)
	}
	rcv := newReceiver(t, h.clock)
	h.subscribe(rcv.URL("/hook"), hub.SubActive, hub.Options{})
	h.publish("one")
	testenv.WaitFor(t, 15*time.Second, "a delivery", func() bool { return len(rcv.deliveries("/hook")) == 1 })
	body := rcv.deliveries("/hook")[0].Body
	var doc struct {
		ID    string `xml:"http://www.w3.org/2005/Atom id"`
		Title string `xml:"http://www.w3.org/2005/Atom title"`
		Links []struct {
			Rel  string `xml:"rel,attr"`
			Href string `xml:"href,attr"`
		} `xml:"http://www.w3.org/2005/Atom link"`
		UpdatePeriod    string `xml:"http://purl.org/rss/1.0/modules/syndication/ updatePeriod"`
		UpdateFrequency string `xml:"http://purl.org/rss/1.0/modules/syndication/ updateFrequency"`
	}
	if err := xml.Unmarshal(body, &doc); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	links := map[string]string{}
	for _, l := range doc.Links {
		links[l.Rel] = l.Href
	}
	atom := testPublicURL + "/atom/news"
	if doc.ID != atom || doc.Title != "News" || links["self"] != atom || links["hub"] != testHub ||
		links["getpingd.updates.descriptor"] != testDescriptor {
		t.Errorf("feed id %q, title %q, links %v; want /atom/news's\n%s", doc.ID, doc.Title, links, body)
	}
	if doc.UpdatePeriod != "hourly" || doc.UpdateFrequency != "2" {
		t.Errorf("polling hints %q %q, want the node's hourly, 2\n%s", doc.UpdatePeriod, doc.UpdateFrequency, body)
	}
}

// patchMeta is how the test renders the node's Atom document; the patch
// anchor does not depend on it.
var patchMeta = feed.FeedMeta{ID: "urn:test:news", Title: "News", SelfURL: testPublicURL + "/atom/news"}

// entryView is what the comparison looks at in each entry.
type entryView struct{ ID, Title, Link string }

func entries(t *testing.T, doc []byte) []entryView {
	t.Helper()
	f, err := gofeed.NewParser().Parse(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	out := make([]entryView, 0, len(f.Items))
	for _, it := range f.Items {
		out = append(out, entryView{it.GUID, it.Title, it.Link})
	}
	return out
}

func TestDeliveryPatch(t *testing.T) {
	for _, diff := range []string{getpingd.DiffPatchOps, getpingd.DiffXMLPatch} {
		t.Run(diff, func(t *testing.T) {
			h := newHarness(t)
			rcv := newReceiver(t, h.clock)
			id := h.subscribe(rcv.URL("/patch"), hub.SubActive, hub.Options{Method: getpingd.WebhookMethodPost, Diff: diff})
			ctx := context.Background()
			current := func() []byte {
				items, err := h.hub.Items(ctx, h.node, nil, 0)
				if err != nil {
					t.Fatal(err)
				}
				return feed.AtomFeed(patchMeta, items)
			}
			// The receiver keeps the node's document by applying each patch.
			doc := current()
			seen := 0
			step := func(what string, change func()) {
				t.Helper()
				change()
				testenv.WaitFor(t, 15*time.Second, what, func() bool {
					s := h.sub(id)
					return s.Cursor == h.lastSeq() && s.LeaseOwner == ""
				})
				ds := rcv.deliveries("/patch")
				if len(ds) != seen+1 {
					t.Fatalf("%s: %d deliveries, want %d", what, len(ds), seen+1)
				}
				seen++
				d := ds[len(ds)-1]
				if d.ContentType != diff {
					t.Errorf("%s: Content-Type %q", what, d.ContentType)
				}
				next, err := feed.ApplyPatch(doc, d.Body)
				if err != nil {
					t.Fatalf("%s: the patch does not apply: %v\npatch:\n%s\ndocument:\n%s", what, err, d.Body, doc)
				}
				doc = next
				if got, want := entries(t, doc), entries(t, current()); !slices.Equal(got, want) {
					t.Fatalf("%s: patched document has\n%v\nthe node's document\n%v\npatch:\n%s", what, got, want, d.Body)
				}
			}

			step("first items", func() { h.publish("a", "b") })
			step("one more", func() { h.publish("c") })
			step("a retraction", func() {
				if _, err := h.hub.Retract(ctx, "news", "owner", []string{"a"}); err != nil {
					t.Fatal(err)
				}
			})
			// While the receiver is down: an item published and retracted
			// (never in its document), a new one, and an old one retracted;
			// then all of it in one patch.
			step("a batch with retractions", func() {
				rcv.Down()
				h.publish("e")
				if _, err := h.hub.Retract(ctx, "news", "owner", []string{"e"}); err != nil {
					t.Fatal(err)
				}
				h.publish("f")
				if _, err := h.hub.Retract(ctx, "news", "owner", []string{"b"}); err != nil {
					t.Fatal(err)
				}
				testenv.WaitFor(t, 15*time.Second, "a failed attempt", func() bool { s := h.sub(id); return s.ConsecutiveErrors > 0 && s.LeaseOwner == "" })
				rcv.Up()
				h.clock.Set(h.sub(id).NextAttemptAt)
				h.engine.Wake(0)
			})
			step("a purge and new items", func() {
				rcv.Down()
				if err := h.hub.Purge(ctx, "news", "owner"); err != nil {
					t.Fatal(err)
				}
				h.publish("g", "h")
				testenv.WaitFor(t, 15*time.Second, "a failed attempt", func() bool { s := h.sub(id); return s.ConsecutiveErrors > 0 && s.LeaseOwner == "" })
				rcv.Up()
				h.clock.Set(h.sub(id).NextAttemptAt)
				h.engine.Wake(0)
			})
			step("after the purge", func() { h.publish("i") })
		})
	}
}

// TestDeliveryNoneSkipsRemovals: a full-entries subscriber is told of new
// entries only; a batch of retractions alone sends nothing and moves on.
func TestDeliveryNoneSkipsRemovals(t *testing.T) {
	h := newHarness(t)
	rcv := newReceiver(t, h.clock)
	id := h.subscribe(rcv.URL("/hook"), hub.SubActive, hub.Options{})
	h.publish("a")
	testenv.WaitFor(t, 15*time.Second, "the first delivery", func() bool { return len(rcv.deliveries("")) == 1 })
	if _, err := h.hub.Retract(context.Background(), "news", "owner", []string{"a"}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 15*time.Second, "the cursor to pass the retraction", func() bool { s := h.sub(id); return s.Cursor == h.lastSeq() && s.LeaseOwner == "" })
	h.publish("b")
	testenv.WaitFor(t, 15*time.Second, "the second delivery", func() bool { return len(rcv.deliveries("")) == 2 })
	if ids := atomIDs(t, rcv.deliveries("")[1].Body); !slices.Equal(ids, []string{feed.AtomID("b")}) {
		t.Errorf("second delivery %v", ids)
	}
}
