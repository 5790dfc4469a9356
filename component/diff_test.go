package component

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

func TestDigestRemovals(t *testing.T) {
	ev := func(kind hub.EventKind, id string) hub.Event { return hub.Event{Kind: kind, ItemID: id} }
	cases := []struct {
		name      string
		events    []hub.Event
		retracted string
		purged    bool
	}{
		{"retractions", []hub.Event{ev(hub.EventRetract, "a"), ev(hub.EventItem, "b"), ev(hub.EventRetract, "c")}, "a,c", false},
		{"published and retracted in one digest", []hub.Event{ev(hub.EventItem, "a"), ev(hub.EventRetract, "a")}, "", false},
		{"retracted and published again", []hub.Event{ev(hub.EventRetract, "a"), ev(hub.EventItem, "a")}, "", false},
		{"a purge", []hub.Event{ev(hub.EventRetract, "a"), ev(hub.EventPurge, ""), ev(hub.EventItem, "b"), ev(hub.EventRetract, "c")}, "c", true},
		{"nothing removed", []hub.Event{ev(hub.EventItem, "a"), ev(hub.EventLast, "a"), ev(hub.EventChange, "")}, "", false},
	}
	for _, tc := range cases {
		retracted, purged := digestRemovals(tc.events)
		if strings.Join(retracted, ",") != tc.retracted || purged != tc.purged {
			t.Errorf("%s: retracted %v, purged %v; want %q, %v", tc.name, retracted, purged, tc.retracted, tc.purged)
		}
	}
}

// diffOf returns the patch document a notification carries, "" for none.
func diffOf(t testing.TB, msg *element) string {
	t.Helper()
	d := msg.child(nsGetPingdXMPP, "Diff")
	if d == nil {
		return ""
	}
	if d.attr("type") != hub.DiffPatchOps || len(d.Children) != 0 {
		t.Errorf("the diff element %s, want the patch as the text of a <Diff type=%q/>", d.standalone(), hub.DiffPatchOps)
	}
	return d.text()
}

// atomDoc is the node's Atom document as pingd renders it, with a fixed
// feed <updated> (which patches leave alone).
func (e *env) atomDoc(name string) []byte {
	e.t.Helper()
	n, err := e.hub.Node(e.ctx, name)
	if err != nil {
		e.t.Fatal(err)
	}
	items, err := e.hub.Items(e.ctx, n, nil, n.MaxItems)
	if err != nil {
		e.t.Fatal(err)
	}
	return feed.AtomFeed(feed.FeedMeta{ID: envPublicURL + "/atom/" + name, Title: n.Title,
		Updated: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)}, items)
}

// betweenTags is white space between two tags, which patches place
// differently from a rendered document.
var betweenTags = regexp.MustCompile(`>\s+<`)

// applyDiffs applies the patches of msgs in order to doc and checks that
// the result is want.
func applyDiffs(t testing.TB, who string, doc, want []byte, msgs ...*element) {
	t.Helper()
	for _, m := range msgs {
		patch := diffOf(t, m)
		if patch == "" {
			t.Fatalf("%s: a notification without a patch: %s", who, m.standalone())
		}
		var err error
		if doc, err = feed.ApplyPatch(doc, []byte(patch)); err != nil {
			t.Fatalf("%s: apply %s: %v", who, patch, err)
		}
	}
	got, exp := betweenTags.ReplaceAll(bytes.TrimSpace(doc), []byte("><")), betweenTags.ReplaceAll(bytes.TrimSpace(want), []byte("><"))
	if !bytes.Equal(got, exp) {
		t.Errorf("%s: the patches made\n%s\nof the previous document, want the node's new one\n%s", who, got, exp)
	}
}

// TestDiffs: subscriptions asking for diffs (x-pingd#diff, by XEP-0060
// subscription options or the ad-hoc command) get, beside each pubsub
// event, the patch that turns the node's previous Atom document into the
// new one: applied in order, the patches of new items and of a retraction
// give the node's document. Subscriptions without the option, and readers
// of plain messages, get no patch.
func TestDiffs(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("demo", "Demo feed", hub.AccessOpen)
	e.publish("demo", "d1")
	e.p.Register("carol", password)
	e.p.Register("dave", password)
	bob := e.dial("bob", "diff")      // XEP-0060 subscribe-and-configure with diffs
	alice := e.dial("alice", "plain") // XEP-0060 without options
	carol := e.dial("carol", "adhoc") // the ad-hoc command: pubsub events with diffs
	dave := e.dial("dave", "reader")  // the ad-hoc command: plain messages, diffs asked for

	diffOptions := func(value string) string {
		return fmt.Sprintf(`<x xmlns="jabber:x:data" type="submit"><field var="FORM_TYPE" type="hidden"><value>%s</value></field>`+
			`<field var="%s"><value>%s</value></field></x>`, formSubscribeOptions, fieldDiff, value)
	}
	// An unknown diff is refused, and nothing is subscribed.
	refused := stanzaErr(t, e.request(bob, "set", fmt.Sprintf(`<pubsub xmlns=%q><subscribe node="demo" jid=%q/><options>%s</options></pubsub>`,
		nsPubsub, bob.JID, diffOptions("application/json-patch+json"))), "modify", "bad-request", "invalid-options")
	if text := refused.child(nsStanzaErrors, "text").text(); !strings.Contains(text, fieldDiff) {
		t.Errorf("the refusal says %q, want the field named", text)
	}
	ans := result(t, e.request(bob, "set", fmt.Sprintf(`<pubsub xmlns=%q><subscribe node="demo" jid=%q/><options>%s</options></pubsub>`,
		nsPubsub, bob.JID, diffOptions(hub.DiffPatchOps))))
	if f, serr := parseForm(find(ans, "pubsub", "options", "x")); serr != nil || len(f.Values[fieldDiff]) != 1 || f.Values[fieldDiff][0] != hub.DiffPatchOps {
		t.Fatalf("subscribe-and-configure with diffs answered %s", ans.standalone())
	}
	result(t, e.request(alice, "set", subscribePayload("demo", alice.JID.String())))

	// The ad-hoc command's form offers diffs; an unknown one is refused.
	form := find(result(t, command(t, e, carol, "pingd#subscribe", "execute", "", "")), "command", "x")
	if f, serr := parseForm(form); serr != nil || len(f.Values[fieldDiff]) != 1 || f.Values[fieldDiff][0] != diffNone {
		t.Errorf("the ad-hoc subscribe form: %s, want %s offered with none chosen", form.standalone(), fieldDiff)
	}
	completedNote(t, command(t, e, carol, "pingd#subscribe", "complete", "s1",
		submitFields(map[string]string{"target": "demo", fieldDiff: "text/x-diff"})), "error")
	completedNote(t, command(t, e, carol, "pingd#subscribe", "complete", "s2",
		submitFields(map[string]string{"target": "demo", fieldFormat: hub.FormatPubsub, fieldIncludeBody: "1", fieldDiff: hub.DiffPatchOps})), "info")
	completedNote(t, command(t, e, dave, "pingd#subscribe", "complete", "s3",
		submitFields(map[string]string{"target": "demo", fieldDiff: hub.DiffPatchOps})), "info")

	// The newest item a new subscription is sent is no change: no patch.
	// Pubsub events carry the XEP-0060 delay; dave's plain message does
	// not (it answers his command, below it).
	for _, c := range []*testenv.Client{bob, alice, carol, dave} {
		m := nextMessage(t, c, 10*time.Second, isNotification)
		if delayed := m.child(nsDelay, "delay") != nil; delayed != (c != dave) || diffOf(t, m) != "" {
			t.Errorf("%s: the newest item on subscribing came as %s, want it without a patch, delayed only as a pubsub event", c.JID, m.standalone())
		}
	}

	// New items: one patch per event, each adding its entry.
	before := e.atomDoc("demo")
	e.publish("demo", "d2", "d3")
	after := e.atomDoc("demo")
	for _, c := range []*testenv.Client{bob, carol} {
		m2, m3 := nextMessage(t, c, 10*time.Second, isEvent), nextMessage(t, c, 10*time.Second, isEvent)
		if !strings.Contains(diffOf(t, m2), "Title d2") || !strings.Contains(diffOf(t, m3), "Title d3") {
			t.Errorf("%s: patches %q and %q, want d2's entry, then d3's", c.JID, diffOf(t, m2), diffOf(t, m3))
		}
		applyDiffs(t, c.JID.String(), before, after, m2, m3)
	}
	for _, c := range []*testenv.Client{alice, dave} {
		for range 2 {
			if m := nextMessage(t, c, 10*time.Second, isNotification); diffOf(t, m) != "" {
				t.Errorf("%s asked for no patches with pubsub events, and got %s", c.JID, m.standalone())
			}
		}
	}

	// A retraction: the patch removes the entry.
	before = after
	if _, err := e.hub.Retract(e.ctx, "demo", e.admin, []string{"d2"}); err != nil {
		t.Fatal(err)
	}
	after = e.atomDoc("demo")
	m := nextMessage(t, bob, 10*time.Second, isEvent)
	if find(m, "event", "items", "retract") == nil {
		t.Fatalf("bob got %s, want the retraction", m.standalone())
	}
	applyDiffs(t, "bob", before, after, m)
	if m := nextMessage(t, alice, 10*time.Second, isEvent); find(m, "event", "items", "retract") == nil || diffOf(t, m) != "" {
		t.Errorf("alice got %s, want the retraction without a patch", m.standalone())
	}

	// The options say so, and turning diffs off ends the patches.
	opts := result(t, e.request(bob, "get", fmt.Sprintf(`<pubsub xmlns=%q><options node="demo" jid=%q/></pubsub>`, nsPubsub, bob.JID)))
	if f, serr := parseForm(find(opts, "pubsub", "options", "x")); serr != nil || f.Values[fieldDiff][0] != hub.DiffPatchOps {
		t.Errorf("bob's options %s, want %s", opts.standalone(), hub.DiffPatchOps)
	}
	result(t, e.request(bob, "set", fmt.Sprintf(`<pubsub xmlns=%q><options node="demo" jid=%q>%s</options></pubsub>`, nsPubsub, bob.JID, diffOptions("none"))))
	e.publish("demo", "d4")
	if m := nextMessage(t, bob, 10*time.Second, isEvent); diffOf(t, m) != "" || itemsOf(t, &event{msg: m, ev: m.child(nsPubsubEvent, "event")}, "demo")[0].id != "d4" {
		t.Errorf("after turning diffs off bob got %s", m.standalone())
	}

	// A purge: the patch replaces the document with one without entries.
	for _, kind := range []string{"retract", "item"} { // d2's retraction and d4, before
		if m := nextMessage(t, carol, 10*time.Second, isEvent); find(m, "event", "items", kind) == nil {
			t.Fatalf("carol got %s, want an event with %s", m.standalone(), kind)
		}
	}
	before = e.atomDoc("demo")
	if err := e.hub.Purge(e.ctx, "demo", e.admin); err != nil {
		t.Fatal(err)
	}
	m = nextMessage(t, carol, 10*time.Second, isEvent)
	if find(m, "event", "purge") == nil {
		t.Fatalf("carol got %s, want the purge", m.standalone())
	}
	doc, err := feed.ApplyPatch(before, []byte(diffOf(t, m)))
	if err != nil || !bytes.Contains(before, []byte("<entry")) || bytes.Contains(doc, []byte("<entry")) {
		t.Errorf("the purge's patch made %s of %s, %v; want a document without entries", doc, before, err)
	}
}

// TestDiffDigests: a digest subscription asking for diffs gets the patch
// of everything its digest covers, and a digest for retractions alone.
func TestDiffDigests(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("demo", "Demo feed", hub.AccessOpen)
	bob := e.dial("bob", "digest")
	result(t, e.request(bob, "set", fmt.Sprintf(`<pubsub xmlns=%q><subscribe node="demo" jid=%q/><options>%s</options></pubsub>`,
		nsPubsub, bob.JID, strings.Replace(digestOptions("1000"), "</x>",
			`<field var="`+fieldDiff+`"><value>`+hub.DiffPatchOps+`</value></field></x>`, 1))))

	before := e.atomDoc("demo")
	e.publish("demo", "d1")
	e.publish("demo", "d2")
	after := e.atomDoc("demo")
	m := nextMessage(t, bob, 10*time.Second, isEvent)
	if got := itemsOf(t, &event{msg: m, ev: m.child(nsPubsubEvent, "event")}, "demo"); len(got) != 2 {
		t.Fatalf("the digest carries %v, want d1 and d2", got)
	}
	applyDiffs(t, "digest", before, after, m)

	// Nothing new, one entry retracted: a digest of the retraction.
	before = after
	if _, err := e.hub.Retract(e.ctx, "demo", e.admin, []string{"d1"}); err != nil {
		t.Fatal(err)
	}
	after = e.atomDoc("demo")
	m = nextMessage(t, bob, 10*time.Second, isEvent)
	if r := find(m, "event", "items", "retract"); r == nil || r.attr("id") != "d1" {
		t.Fatalf("the digest of a retraction is %s", m.standalone())
	}
	applyDiffs(t, "digest of a retraction", before, after, m)

	// A purge: the patch replaces the document with the empty one.
	before = after
	if err := e.hub.Purge(e.ctx, "demo", e.admin); err != nil {
		t.Fatal(err)
	}
	m = nextMessage(t, bob, 10*time.Second, isEvent)
	if find(m, "event", "purge") == nil || !strings.Contains(diffOf(t, m), "replace") {
		t.Fatalf("the digest of a purge is %s", m.standalone())
	}
	doc, err := feed.ApplyPatch(before, []byte(diffOf(t, m)))
	if err != nil || bytes.Contains(doc, []byte("<entry")) {
		t.Errorf("after the purge's patch the document is %s, %v; want no entries", doc, err)
	}
}

// TestDiffRenderedOnce: the fan-out makes each event's patch once for all
// the subscriptions asking for diffs, whatever their other options, and
// not at all when none asks.
func TestDiffRenderedOnce(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.stop()
	var patches atomic.Int64
	e.startComponentWith(func(cfg *Config) {
		patch := cfg.Patch
		cfg.Patch = func(n *hub.Node, events []hub.Event) ([]byte, error) {
			patches.Add(1)
			return patch(n, events)
		}
	})
	e.createNode("demo", "Demo feed", hub.AccessOpen)
	alice := e.dial("alice", "plain")
	result(t, e.request(alice, "set", subscribePayload("demo", alice.JID.String())))
	e.publish("demo", "a1", "a2")
	collectItems(t, alice, "demo", 2)
	if n := patches.Load(); n != 0 {
		t.Fatalf("%d patches made for a subscriber who asked for none", n)
	}

	e.p.Register("carol", password)
	bob, carol := e.dial("bob", "diff"), e.dial("carol", "diff")
	for i, c := range []*testenv.Client{bob, carol} {
		body := []string{"0", "1"}[i] // with and without a readable body
		result(t, e.request(c, "set", fmt.Sprintf(`<pubsub xmlns=%q><subscribe node="demo" jid=%q/><options><x xmlns="jabber:x:data" type="submit">`+
			`<field var="FORM_TYPE" type="hidden"><value>%s</value></field><field var="%s"><value>%s</value></field>`+
			`<field var="%s"><value>%s</value></field></x></options></pubsub>`,
			nsPubsub, c.JID, formSubscribeOptions, fieldDiff, hub.DiffPatchOps, fieldIncludeBody, body)))
		nextMessage(t, c, 10*time.Second, isEvent) // the newest item, without a patch
	}
	e.publish("demo", "a3", "a4")
	for _, c := range []*testenv.Client{bob, carol} {
		for range 2 {
			if m := nextMessage(t, c, 10*time.Second, isEvent); diffOf(t, m) == "" {
				t.Errorf("%s: no patch in %s", c.JID, m.standalone())
			}
		}
	}
	collectItems(t, alice, "demo", 2)
	if n := patches.Load(); n != 2 {
		t.Errorf("%d patches made for 2 items, want one each", n)
	}
}

// TestDiffLeftOutOfLargeNotifications: a notification that would outgrow
// the stanza budget with its patch goes without it (the entry is in
// both, and the XMPP server would end the stream for a stanza over its
// limit); the next one carries its patch again.
func TestDiffLeftOutOfLargeNotifications(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	n := e.createNode("demo", "Demo feed", hub.AccessOpen)
	bob := e.dial("bob", "diff")
	result(t, e.request(bob, "set", fmt.Sprintf(`<pubsub xmlns=%q><subscribe node="demo" jid=%q/><options><x xmlns="jabber:x:data" type="submit">`+
		`<field var="FORM_TYPE" type="hidden"><value>%s</value></field><field var="%s"><value>%s</value></field></x></options></pubsub>`,
		nsPubsub, bob.JID, formSubscribeOptions, fieldDiff, hub.DiffPatchOps)))
	// 150 KiB of text, stored as an item stored before the entry limit
	// was (the hub refuses it now): the event takes it, the event with
	// its patch (300 KiB) would be over the stanza budget.
	text := strings.Repeat("All work and no play. ", 150<<10/22)
	big := fmt.Sprintf(`<entry xmlns="http://www.w3.org/2005/Atom"><id>big</id><title>Big</title><link href="http://example.org/big"/>`+
		`<updated>2024-01-02T03:04:05Z</updated><content type="text">%s</content></entry>`, text)
	if _, err := e.store.Append(e.ctx, n.ID, []hub.Event{{Kind: hub.EventItem, ItemID: "big", Title: "Big", Link: "http://example.org/big", Payload: []byte(big)}}); err != nil {
		t.Fatal(err)
	}
	e.comp.Wake(n.ID)
	e.publish("demo", "small")
	m := nextMessage(t, bob, 20*time.Second, isEvent)
	if got := itemsOf(t, &event{msg: m, ev: m.child(nsPubsubEvent, "event")}, "demo"); len(got) != 1 || got[0].id != "big" || diffOf(t, m) != "" {
		t.Errorf("the large notification: items %v, patch %d bytes; want big without its patch", got, len(diffOf(t, m)))
	}
	m = nextMessage(t, bob, 20*time.Second, isEvent)
	if got := itemsOf(t, &event{msg: m, ev: m.child(nsPubsubEvent, "event")}, "demo"); len(got) != 1 || got[0].id != "small" || !strings.Contains(diffOf(t, m), "Title small") {
		t.Errorf("the next notification: items %v, patch %q; want small with its patch", got, diffOf(t, m))
	}
	if !strings.Contains(e.logs.String(), "patch is left out") {
		t.Error("leaving the patch out was not logged")
	}
}
