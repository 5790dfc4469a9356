package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

func testAppendSequences(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	before := time.Now().Add(-time.Second)
	updated := time.Date(2020, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600))
	got := appendEvents(t, s, n.ID,
		hub.Event{Kind: hub.EventItem, ItemID: "1", Payload: []byte("<entry>1</entry>"), Title: "one",
			Summary: "first", Link: "https://example.org/1", Publisher: "owner@example.org", Updated: updated},
		item("2", "<entry>2</entry>"))
	if len(got) != 2 || got[0].Seq != 1 || got[1].Seq != 2 {
		t.Fatalf("first append seqs = %+v", got)
	}
	for _, e := range got {
		if e.NodeID != n.ID || e.Created.Before(before) || e.Created.Location() != time.UTC {
			t.Fatalf("event not filled in: %+v", e)
		}
	}
	got = appendEvents(t, s, n.ID, hub.Event{Kind: hub.EventChange}, item("3", "<entry>3</entry>"))
	if got[0].Seq != 3 || got[1].Seq != 4 {
		t.Fatalf("second append seqs = %d, %d", got[0].Seq, got[1].Seq)
	}
	if n := must(s.NodeByID(ctx, n.ID))(t); n.LastSeq != 4 {
		t.Fatalf("LastSeq = %d, want 4", n.LastSeq)
	}
	stored := must(s.EventsAfter(ctx, n.ID, 0, 0))(t)
	e := stored[0]
	if e.Kind != hub.EventItem || e.ItemID != "1" || string(e.Payload) != "<entry>1</entry>" || e.Title != "one" ||
		e.Summary != "first" || e.Link != "https://example.org/1" || e.Publisher != "owner@example.org" ||
		!e.Updated.Equal(updated) || e.Updated.Location() != time.UTC {
		t.Fatalf("stored event = %+v", e)
	}
	if !stored[1].Updated.IsZero() {
		t.Fatalf("zero Updated came back as %v", stored[1].Updated)
	}

	_, err := s.Append(ctx, n.ID+1000, []hub.Event{item("x", "<x/>")})
	wantErr(t, err, hub.ErrNotFound)
	_, err = s.Append(ctx, n.ID+1000, nil)
	wantErr(t, err, hub.ErrNotFound)
}

func testAppendValidates(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	_, err := s.Append(ctx, n.ID, []hub.Event{item("ok", "<a/>"), {Kind: "bogus"}})
	wantErr(t, err, hub.ErrInvalid)
	_, err = s.Append(ctx, n.ID, []hub.Event{{Kind: hub.EventItem}})
	wantErr(t, err, hub.ErrInvalid)
	// Nothing of a refused batch is kept.
	if got := must(s.NodeByID(ctx, n.ID))(t); got.LastSeq != 0 {
		t.Fatalf("LastSeq = %d after refused appends", got.LastSeq)
	}
}

func testItemReplace(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	appendEvents(t, s, n.ID, item("a", "<a>1</a>"), item("b", "<b/>"))
	appendEvents(t, s, n.ID, item("a", "<a>2</a>"))
	items := must(s.Items(ctx, n.ID, nil, 0))(t)
	equalStrings(t, "items", itemIDs(items), []string{"a", "b"})
	if string(items[0].Payload) != "<a>2</a>" || items[0].Seq != 3 {
		t.Fatalf("replaced item = %+v", items[0])
	}
	// The log keeps both versions.
	if evs := must(s.EventsAfter(ctx, n.ID, 0, 0))(t); len(evs) != 3 {
		t.Fatalf("log has %d events, want 3", len(evs))
	}
	// Replacing within one batch: the last one is current.
	appendEvents(t, s, n.ID, item("c", "<c>1</c>"), item("c", "<c>2</c>"))
	got := must(s.Items(ctx, n.ID, []string{"c"}, 0))(t)
	if len(got) != 1 || string(got[0].Payload) != "<c>2</c>" {
		t.Fatalf("item c = %+v", got)
	}
}

func testItemRetract(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	appendEvents(t, s, n.ID, item("a", "<a/>"), item("b", "<b/>"))
	got := appendEvents(t, s, n.ID, hub.Event{Kind: hub.EventRetract, ItemID: "a", Publisher: "p@example.org"})
	if got[0].Seq != 3 {
		t.Fatalf("retract seq = %d", got[0].Seq)
	}
	equalStrings(t, "items", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"b"})
	if len(must(s.Items(ctx, n.ID, []string{"a"}, 0))(t)) != 0 {
		t.Fatal("retracted item still current")
	}
	// Republishing a retracted id makes it current again.
	appendEvents(t, s, n.ID, item("a", "<a>again</a>"))
	equalStrings(t, "items", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"a", "b"})
}

func testItemPurge(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	other := newNode(t, s, "other")
	appendEvents(t, s, n.ID, item("a", "<a/>"), item("b", "<b/>"))
	appendEvents(t, s, other.ID, item("a", "<a/>"))
	appendEvents(t, s, n.ID, hub.Event{Kind: hub.EventPurge})
	if items := must(s.Items(ctx, n.ID, nil, 0))(t); len(items) != 0 {
		t.Fatalf("items after purge: %q", itemIDs(items))
	}
	if items := must(s.Items(ctx, other.ID, nil, 0))(t); len(items) != 1 {
		t.Fatal("purge reached another node")
	}
	// A purge in the middle of a batch removes only what came before it.
	appendEvents(t, s, n.ID, item("c", "<c/>"), hub.Event{Kind: hub.EventPurge}, item("d", "<d/>"))
	equalStrings(t, "items", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"d"})
}

func testMaxItems(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n", withMaxItems(3))
	for _, id := range []string{"1", "2", "3", "4", "5"} {
		appendEvents(t, s, n.ID, item(id, "<"+id+"/>"))
	}
	equalStrings(t, "items", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"5", "4", "3"})
	// No retract event was written for the ones that scrolled off.
	if ks := kinds(must(s.EventsAfter(ctx, n.ID, 0, 0))(t)); slices.Contains(ks, hub.EventRetract) {
		t.Fatalf("log kinds %v contain a retraction", ks)
	}
	// Republishing the oldest current item makes it the newest.
	appendEvents(t, s, n.ID, item("3", "<3>new</3>"), item("6", "<6/>"))
	equalStrings(t, "items", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"6", "3", "5"})
	// A batch larger than max_items keeps its newest.
	appendEvents(t, s, n.ID, item("a", ""), item("b", ""), item("c", ""), item("d", ""))
	equalStrings(t, "items", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"d", "c", "b"})
	// Lowering max_items takes effect with the next item.
	cfg := hub.DefaultNodeConfig()
	cfg.MaxItems = 1
	noErr(t, s.UpdateNodeConfig(ctx, "n", cfg))
	appendEvents(t, s, n.ID, item("e", ""))
	equalStrings(t, "items", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"e"})
}

func testItemsByID(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	appendEvents(t, s, n.ID, item("a", ""), item("b", ""), item("c", ""), item("d", ""))
	equalStrings(t, "by id", itemIDs(must(s.Items(ctx, n.ID, []string{"b", "missing", "d", "a", "b"}, 0))(t)),
		[]string{"d", "b", "a"})
	equalStrings(t, "newest 2", itemIDs(must(s.Items(ctx, n.ID, nil, 2))(t)), []string{"d", "c"})
	equalStrings(t, "all", itemIDs(must(s.Items(ctx, n.ID, nil, -1))(t)), []string{"d", "c", "b", "a"})
	if got := must(s.Items(ctx, n.ID, []string{"missing"}, 0))(t); len(got) != 0 {
		t.Fatalf("missing id gave %+v", got)
	}
	// Many ids at once.
	var ids []string
	var events []hub.Event
	for i := range 1200 {
		id := fmt.Sprintf("bulk-%04d", i)
		ids = append(ids, id)
		events = append(events, item(id, ""))
	}
	big := newNode(t, s, "big", withMaxItems(hub.MaxItemsLimit))
	appendEvents(t, s, big.ID, events...)
	got := must(s.Items(ctx, big.ID, ids, 0))(t)
	if len(got) != hub.MaxItemsLimit || got[0].ItemID != "bulk-1199" || got[len(got)-1].ItemID != "bulk-0200" {
		t.Fatalf("bulk lookup gave %d items, %s … %s", len(got), got[0].ItemID, got[len(got)-1].ItemID)
	}
}

func testEventsAfter(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	other := newNode(t, s, "other")
	appendEvents(t, s, n.ID, item("a", ""), hub.Event{Kind: hub.EventRetract, ItemID: "a"},
		hub.Event{Kind: hub.EventRevoke, Address: "x@example.org", PlainType: hub.NotifyChat}, item("b", ""))
	appendEvents(t, s, other.ID, item("z", ""))
	all := must(s.EventsAfter(ctx, n.ID, 0, 0))(t)
	if ks := kinds(all); !slices.Equal(ks, []hub.EventKind{hub.EventItem, hub.EventRetract, hub.EventRevoke, hub.EventItem}) {
		t.Fatalf("kinds = %v", ks)
	}
	if all[2].Address != "x@example.org" {
		t.Fatalf("revoke address = %q", all[2].Address)
	}
	// A revoke keeps the message type its reader's plain messages had.
	if all[2].PlainType != hub.NotifyChat || all[2].Publisher != "" {
		t.Fatalf("revoke plain type = %q, publisher %q; want %q and none", all[2].PlainType, all[2].Publisher, hub.NotifyChat)
	}
	page := must(s.EventsAfter(ctx, n.ID, 1, 2))(t)
	if len(page) != 2 || page[0].Seq != 2 || page[1].Seq != 3 {
		t.Fatalf("page = %+v", page)
	}
	if rest := must(s.EventsAfter(ctx, n.ID, 4, 10))(t); len(rest) != 0 {
		t.Fatalf("after the end: %+v", rest)
	}
}

func testXMPPSeq(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	a := newNode(t, s, "a")
	b := newNode(t, s, "b")
	if behind := must(s.NodesBehindXMPP(ctx))(t); len(behind) != 0 {
		t.Fatalf("fresh nodes behind: %+v", behind)
	}
	appendEvents(t, s, a.ID, item("1", ""), item("2", ""))
	appendEvents(t, s, b.ID, item("1", ""))
	noErr(t, s.SetXMPPSeq(ctx, b.ID, 1))
	behind := must(s.NodesBehindXMPP(ctx))(t)
	if len(behind) != 1 || behind[0].ID != a.ID || behind[0].LastSeq != 2 || behind[0].XMPPSeq != 0 {
		t.Fatalf("behind = %+v", behind)
	}
	noErr(t, s.SetXMPPSeq(ctx, a.ID, 2))
	if behind := must(s.NodesBehindXMPP(ctx))(t); len(behind) != 0 {
		t.Fatalf("behind after catching up: %+v", behind)
	}
	if got := must(s.NodeByID(ctx, a.ID))(t); got.XMPPSeq != 2 {
		t.Fatalf("XMPPSeq = %d", got.XMPPSeq)
	}
	// Never backwards: an acknowledgement recorded late changes nothing.
	noErr(t, s.SetXMPPSeq(ctx, a.ID, 1))
	if got := must(s.NodeByID(ctx, a.ID))(t); got.XMPPSeq != 2 {
		t.Fatalf("XMPPSeq after an older cursor = %d, want 2", got.XMPPSeq)
	}
	wantErr(t, s.SetXMPPSeq(ctx, a.ID+1000, 1), hub.ErrNotFound)
	// Never past the log: a cursor beyond the newest event (a marker
	// forged or meant for another node) stops at it, so the next event
	// is still sent.
	noErr(t, s.SetXMPPSeq(ctx, b.ID, 1_000_000))
	if got := must(s.NodeByID(ctx, b.ID))(t); got.XMPPSeq != 1 {
		t.Fatalf("XMPPSeq after a cursor past the log = %d, want 1", got.XMPPSeq)
	}
	appendEvents(t, s, b.ID, item("2", ""))
	if behind := must(s.NodesBehindXMPP(ctx))(t); len(behind) != 1 || behind[0].ID != b.ID || behind[0].XMPPSeq != 1 {
		t.Fatalf("behind after a new event = %+v", behind)
	}
}

func testConcurrentAppend(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "busy", withMaxItems(hub.MaxItemsLimit))
	const workers, rounds = 8, 15
	var wg sync.WaitGroup
	var mu sync.Mutex
	var seqs []int64
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				batch := []hub.Event{item(fmt.Sprintf("%d-%d-a", w, r), "")}
				if r%3 == 0 {
					batch = append(batch, item(fmt.Sprintf("%d-%d-b", w, r), ""))
				}
				got, err := s.Append(ctx, n.ID, batch)
				if err != nil {
					errs <- err
					return
				}
				// A batch takes consecutive numbers.
				for i := 1; i < len(got); i++ {
					if got[i].Seq != got[i-1].Seq+1 {
						errs <- fmt.Errorf("batch not consecutive: %d then %d", got[i-1].Seq, got[i].Seq)
						return
					}
				}
				mu.Lock()
				for _, e := range got {
					seqs = append(seqs, e.Seq)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := workers * (rounds + (rounds+2)/3)
	slices.Sort(seqs)
	if len(seqs) != total {
		t.Fatalf("%d sequence numbers, want %d", len(seqs), total)
	}
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("sequence %d at position %d: not gap-free and unique", seq, i)
		}
	}
	if got := must(s.NodeByID(ctx, n.ID))(t); got.LastSeq != int64(total) {
		t.Fatalf("LastSeq = %d, want %d", got.LastSeq, total)
	}
	if evs := must(s.EventsAfter(ctx, n.ID, 0, 0))(t); len(evs) != total {
		t.Fatalf("log has %d events, want %d", len(evs), total)
	}
}

func testPrune(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n", withMaxItems(2))
	// seq 1 a, 2 b, 3 retract a, 4 c, 5 d, 6 change
	appendEvents(t, s, n.ID, item("a", ""), item("b", ""), hub.Event{Kind: hub.EventRetract, ItemID: "a"},
		item("c", ""), item("d", ""), hub.Event{Kind: hub.EventChange})
	hook := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1/a", State: hub.SubActive}
	must(s.PutSubscription(ctx, hook))(t)
	slow := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebSub, Address: "http://127.0.0.1/b", State: hub.SubPending}
	must(s.PutSubscription(ctx, slow))(t)
	// An XMPP subscription's own cursor does not hold the log: the node's
	// XMPP cursor does.
	must(s.PutSubscription(ctx, &hub.Subscription{NodeID: n.ID, Kind: hub.KindXMPP, Address: "x@example.org", BareJID: "x@example.org"}))(t)

	seqs := func() []int64 {
		var out []int64
		for _, e := range must(s.EventsAfter(ctx, n.ID, 0, 0))(t) {
			out = append(out, e.Seq)
		}
		return out
	}
	// Nobody has passed anything yet.
	noErr(t, s.Prune(ctx, time.Time{}))
	if got := seqs(); !slices.Equal(got, []int64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("pruned with every cursor at 0: %v", got)
	}
	noErr(t, s.SetXMPPSeq(ctx, n.ID, 6))
	noErr(t, s.SaveDeliveryState(ctx, hook.ID, hub.DeliveryState{Cursor: 6}))
	noErr(t, s.SaveDeliveryState(ctx, slow.ID, hub.DeliveryState{Cursor: 3}))
	noErr(t, s.Prune(ctx, time.Time{}))
	// Below 3, only what is not current goes: a (retracted) at 1, b at 2
	// (scrolled off), the retraction at 3.
	if got := seqs(); !slices.Equal(got, []int64{4, 5, 6}) {
		t.Fatalf("after prune to 3: %v", got)
	}
	noErr(t, s.SaveDeliveryState(ctx, slow.ID, hub.DeliveryState{Cursor: 6}))
	noErr(t, s.Prune(ctx, time.Time{}))
	// Current items c (4) and d (5) stay.
	if got := seqs(); !slices.Equal(got, []int64{4, 5}) {
		t.Fatalf("after prune to 6: %v", got)
	}
	equalStrings(t, "items", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"d", "c"})
	// The XMPP cursor holds the log too.
	appendEvents(t, s, n.ID, hub.Event{Kind: hub.EventChange})
	noErr(t, s.SaveDeliveryState(ctx, hook.ID, hub.DeliveryState{Cursor: 7}))
	noErr(t, s.SaveDeliveryState(ctx, slow.ID, hub.DeliveryState{Cursor: 7}))
	noErr(t, s.Prune(ctx, time.Time{}))
	if got := seqs(); !slices.Equal(got, []int64{4, 5, 7}) {
		t.Fatalf("with the XMPP cursor at 6: %v", got)
	}
	// Pruning keeps LastSeq: new events continue the sequence.
	got := appendEvents(t, s, n.ID, item("e", ""))
	if got[0].Seq != 8 {
		t.Fatalf("seq after prune = %d", got[0].Seq)
	}
}
