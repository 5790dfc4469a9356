package storetest

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// fetchOutcome is a successful fetch with content of src.
func fetchOutcome(src *hub.Source, entries ...hub.Entry) hub.FetchOutcome {
	st := src.SourceState
	st.Baselined = true
	st.LastStatus = 200
	st.IsFeed = true
	return hub.FetchOutcome{SourceID: src.ID, State: st, Changed: true, Entries: entries, Owner: src.LeaseOwner}
}

func entry(id string) hub.Entry {
	return hub.Entry{ID: id, Payload: []byte("<entry><id>" + id + "</id></entry>"), Title: "T " + id,
		Summary: "S " + id, Link: "https://example.org/" + id, Updated: t0}
}

func testFetchBaseline(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, n := newSource(t, s, "https://example.org/feed", "n")
	// A failed first fetch is no baseline.
	failed := src.SourceState
	failed.LastError = "connection refused"
	failed.ConsecutiveErrors = 1
	applied := must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: failed}))(t)
	if applied.Baseline || len(applied.New) != 0 || len(applied.Nodes) != 0 {
		t.Fatalf("failed fetch applied = %+v", applied)
	}
	applied = must(s.ApplyFetch(ctx, fetchOutcome(src, entry("1"), entry("2"))))(t)
	if !applied.Baseline || len(applied.New) != 0 || len(applied.Nodes) != 0 {
		t.Fatalf("baseline applied = %+v", applied)
	}
	if evs := told(t, s, n.ID); len(evs) != 0 {
		t.Fatalf("baseline told events: %+v", evs)
	}
	got := must(s.Source(ctx, src.ID))(t)
	if !got.Baselined || got.LastNewItems != 0 {
		t.Fatalf("after baseline: baselined %v, last new %d", got.Baselined, got.LastNewItems)
	}
	// The baseline's entries were recorded as seen.
	applied = must(s.ApplyFetch(ctx, fetchOutcome(got, entry("1"), entry("2"), entry("3"))))(t)
	if applied.Baseline || len(applied.New) != 1 || applied.New[0].ID != "3" {
		t.Fatalf("after baseline applied = %+v", applied)
	}
}

func testFetchNewEntries(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, a := newSource(t, s, "https://example.org/feed", "a")
	b := newNode(t, s, "b", withSource(src.ID))
	unrelated := newNode(t, s, "unrelated")
	must(s.ApplyFetch(ctx, fetchOutcome(src, entry("1"))))(t)
	src = must(s.Source(ctx, src.ID))(t)

	applied := must(s.ApplyFetch(ctx, fetchOutcome(src, entry("1"), entry("2"), entry("3"))))(t)
	if applied.Baseline {
		t.Fatal("second fetch was a baseline")
	}
	var newIDs []string
	for _, e := range applied.New {
		newIDs = append(newIDs, e.ID)
	}
	equalStrings(t, "new", newIDs, []string{"2", "3"})
	if !slices.Equal(sortedIDs(applied.Nodes), sortedIDs([]int64{a.ID, b.ID})) {
		t.Fatalf("nodes = %v, want %d and %d", applied.Nodes, a.ID, b.ID)
	}
	for _, n := range []*hub.Node{a, b} {
		evs := told(t, s, n.ID)
		equalStrings(t, "events of "+n.Name, itemIDs(evs), []string{"2", "3"})
		e := evs[0]
		want := entry("2")
		if e.Kind != hub.EventItem || string(e.Payload) != string(want.Payload) || e.Title != want.Title ||
			e.Summary != want.Summary || e.Link != want.Link || !e.Updated.Equal(want.Updated) {
			t.Fatalf("item event = %+v", e)
		}
		equalStrings(t, "items of "+n.Name, itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"3", "2", "1"})
	}
	if evs := must(s.EventsAfter(ctx, unrelated.ID, 0, 0))(t); len(evs) != 0 {
		t.Fatal("a node not following the source got events")
	}
	if got := must(s.Source(ctx, src.ID))(t); got.LastNewItems != 2 {
		t.Fatalf("LastNewItems = %d", got.LastNewItems)
	}
	// The same entries again are not new.
	applied = must(s.ApplyFetch(ctx, fetchOutcome(src, entry("1"), entry("2"), entry("3"))))(t)
	if len(applied.New) != 0 {
		t.Fatalf("repeated fetch found new %+v", applied.New)
	}
	if got := must(s.Source(ctx, src.ID))(t); got.LastNewItems != 0 {
		t.Fatalf("LastNewItems = %d after no new entries", got.LastNewItems)
	}
}

func sortedIDs(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

func testFetchReorderedAndRepeated(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, n := newSource(t, s, "https://example.org/feed", "n")
	must(s.ApplyFetch(ctx, fetchOutcome(src, entry("1"), entry("2"), entry("3"))))(t)
	src = must(s.Source(ctx, src.ID))(t)
	// Reordered entries, one repeated within the document, one new one
	// repeated: only the new one, once.
	applied := must(s.ApplyFetch(ctx, fetchOutcome(src, entry("3"), entry("4"), entry("1"), entry("2"), entry("1"), entry("4"))))(t)
	if len(applied.New) != 1 || applied.New[0].ID != "4" {
		t.Fatalf("new = %+v", applied.New)
	}
	equalStrings(t, "events", itemIDs(told(t, s, n.ID)), []string{"4"})
	// An entry that dropped out of the feed and comes back is not new.
	must(s.ApplyFetch(ctx, fetchOutcome(src, entry("4"))))(t)
	applied = must(s.ApplyFetch(ctx, fetchOutcome(src, entry("2"), entry("4"))))(t)
	if len(applied.New) != 0 {
		t.Fatalf("returning entry counted as new: %+v", applied.New)
	}
	// Entries without an id cannot be told apart and are left out.
	applied = must(s.ApplyFetch(ctx, fetchOutcome(src, hub.Entry{Title: "no id"}, entry("5"))))(t)
	if len(applied.New) != 1 || applied.New[0].ID != "5" {
		t.Fatalf("new with an id-less entry = %+v", applied.New)
	}
}

func testFetchChangeWithoutNew(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, n := newSource(t, s, "https://example.org/page.html", "n")
	must(s.ApplyFetch(ctx, fetchOutcome(src)))(t)
	src = must(s.Source(ctx, src.ID))(t)
	// Changed, nothing new: one change event.
	applied := must(s.ApplyFetch(ctx, fetchOutcome(src)))(t)
	if len(applied.Nodes) != 1 || applied.Nodes[0] != n.ID {
		t.Fatalf("nodes = %v", applied.Nodes)
	}
	evs := must(s.EventsAfter(ctx, n.ID, 0, 0))(t)
	if ks := kinds(evs); !slices.Equal(ks, []hub.EventKind{hub.EventChange}) {
		t.Fatalf("kinds = %v", ks)
	}
	// Not changed: nothing.
	st := src.SourceState
	st.Unchanged = 1
	applied = must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st}))(t)
	if len(applied.Nodes) != 0 || len(applied.New) != 0 {
		t.Fatalf("unchanged fetch applied = %+v", applied)
	}
	if evs := must(s.EventsAfter(ctx, n.ID, 1, 0))(t); len(evs) != 0 {
		t.Fatalf("unchanged fetch wrote %+v", evs)
	}
	// New entries and no note: items only, no extra change event.
	must(s.ApplyFetch(ctx, fetchOutcome(src, entry("x"))))(t)
	if ks := kinds(must(s.EventsAfter(ctx, n.ID, 1, 0))(t)); !slices.Equal(ks, []hub.EventKind{hub.EventItem}) {
		t.Fatalf("kinds after new entry = %v", ks)
	}
}

func testFetchNote(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, n := newSource(t, s, "https://example.org/feed", "n")
	note := &hub.ChangeNote{Title: "Big news", Description: "It changed."}
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0, note))
	src = must(s.Source(ctx, src.ID))(t)

	// On the baseline the note still notifies (and consumes the note).
	out := fetchOutcome(src, entry("1"))
	out.Note = src.PendingNote
	applied := must(s.ApplyFetch(ctx, out))(t)
	if !applied.Baseline || len(applied.Nodes) != 1 {
		t.Fatalf("baseline with note applied = %+v", applied)
	}
	evs := told(t, s, n.ID)
	if len(evs) != 1 || evs[0].Kind != hub.EventChange || evs[0].Title != "Big news" || evs[0].Summary != "It changed." {
		t.Fatalf("events = %+v", evs)
	}
	src = must(s.Source(ctx, src.ID))(t)
	if src.PendingNote != nil {
		t.Fatalf("consumed note still pending: %+v", src.PendingNote)
	}

	// A note with an unchanged fetch: one change event carrying it.
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0, &hub.ChangeNote{Title: "Again"}))
	src = must(s.Source(ctx, src.ID))(t)
	applied = must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: src.SourceState, Note: src.PendingNote}))(t)
	// (The baseline kept entry 1 at seq 1 and told the note at 2.)
	evs = must(s.EventsAfter(ctx, n.ID, 2, 0))(t)
	if len(evs) != 1 || evs[0].Kind != hub.EventChange || evs[0].Title != "Again" || len(applied.Nodes) != 1 {
		t.Fatalf("unchanged fetch with note: events %+v applied %+v", evs, applied)
	}

	// A note with a change but nothing new: still one change event.
	out = fetchOutcome(src)
	out.Note = &hub.ChangeNote{Title: "Edited"}
	must(s.ApplyFetch(ctx, out))(t)
	evs = must(s.EventsAfter(ctx, n.ID, 3, 0))(t)
	if len(evs) != 1 || evs[0].Title != "Edited" {
		t.Fatalf("changed fetch with note: events %+v", evs)
	}

	// A note with new entries: the items and the note.
	out = fetchOutcome(src, entry("1"), entry("2"))
	out.Note = &hub.ChangeNote{Title: "New post"}
	must(s.ApplyFetch(ctx, out))(t)
	evs = must(s.EventsAfter(ctx, n.ID, 4, 0))(t)
	if ks := kinds(evs); !slices.Equal(ks, []hub.EventKind{hub.EventItem, hub.EventChange}) || evs[1].Title != "New post" {
		t.Fatalf("new entries with note: %+v", evs)
	}
}

func testFetchNoteReplaced(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := newSource(t, s, "https://example.org/feed", "n")
	must(s.ApplyFetch(ctx, fetchOutcome(src)))(t)
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0, &hub.ChangeNote{Title: "first"}))
	claimed := must(s.ClaimDueSources(ctx, t0, 1, "me", t0.Add(time.Minute)))(t)
	if len(claimed) != 1 {
		t.Fatalf("claimed %d", len(claimed))
	}
	// A second announcement arrives while the fetch runs.
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0.Add(time.Second), &hub.ChangeNote{Title: "second"}))
	out := hub.FetchOutcome{SourceID: src.ID, State: claimed[0].SourceState, Note: claimed[0].PendingNote, Owner: "me"}
	must(s.ApplyFetch(ctx, out))(t)
	got := must(s.Source(ctx, src.ID))(t)
	if got.PendingNote == nil || got.PendingNote.Title != "second" {
		t.Fatalf("pending note = %+v, want the second one kept", got.PendingNote)
	}
	// A fetch without a note leaves the pending one alone.
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: got.SourceState}))(t)
	if got := must(s.Source(ctx, src.ID))(t); got.PendingNote == nil {
		t.Fatal("a fetch without a note cleared the pending note")
	}
}

func testFetchStateRoundTrip(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := newSource(t, s, "https://example.org/feed", "n")
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0, nil))
	claimed := must(s.ClaimDueSources(ctx, t0, 1, "me", t0.Add(time.Minute)))(t)
	st := hub.SourceState{
		URL: "https://example.org/feed", ETag: `"abc"`, LastModified: "Tue, 15 Nov 1994 12:45:26 GMT",
		BodyHash: "sha256:00ff", ContentType: "application/rss+xml", Body: []byte("<rss>\x00binary\xff</rss>"),
		IsFeed: true, Title: "Feed", Description: "A feed", SiteURL: "https://example.org/",
		Hints: hub.PollHints{TTL: 30 * time.Minute, SkipHours: []int{0, 23}, SkipDays: []time.Weekday{time.Sunday},
			UpdatePeriod: "hourly", UpdateFrequency: 2, UpdateBase: t0.Add(-time.Hour), MaxAge: time.Minute,
			Expires: t0.Add(time.Hour), RetryAfter: t0.Add(2 * time.Hour)},
		Baselined: true, LastFetchAt: t0, LastStatus: 200, LastBytes: 12345, LastError: "",
		ConsecutiveErrors: 0, Unchanged: 4, LastChangeAt: t0.Add(-time.Minute), LastPingAt: t0,
		NextFetchAt: t0.Add(time.Hour), NextFetchReason: "ttl",
	}
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: claimed[0].ID, State: st, Changed: true, Owner: "me"}))(t)
	got := must(s.Source(ctx, src.ID))(t)
	want := st
	want.LastNewItems = 0
	if got.URL != want.URL || got.ETag != want.ETag || got.LastModified != want.LastModified ||
		got.BodyHash != want.BodyHash || got.ContentType != want.ContentType || !bytes.Equal(got.Body, want.Body) ||
		!got.IsFeed || got.Title != want.Title || got.Description != want.Description || got.SiteURL != want.SiteURL ||
		!got.Baselined || got.Gone || !got.LastFetchAt.Equal(t0) || got.LastStatus != 200 || got.LastBytes != 12345 ||
		got.Unchanged != 4 || !got.LastChangeAt.Equal(want.LastChangeAt) || !got.LastPingAt.Equal(t0) ||
		!got.NextFetchAt.Equal(want.NextFetchAt) || got.NextFetchReason != "ttl" || got.OriginalURL != src.OriginalURL {
		t.Fatalf("stored state\n got %+v\nwant %+v", got.SourceState, want)
	}
	h := got.Hints
	if h.TTL != 30*time.Minute || !slices.Equal(h.SkipHours, []int{0, 23}) || !slices.Equal(h.SkipDays, []time.Weekday{time.Sunday}) ||
		h.UpdatePeriod != "hourly" || h.UpdateFrequency != 2 || !h.UpdateBase.Equal(t0.Add(-time.Hour)) ||
		h.MaxAge != time.Minute || !h.Expires.Equal(t0.Add(time.Hour)) || !h.RetryAfter.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("hints = %+v", h)
	}
	if !got.MovedAt.IsZero() || got.MovedFrom != "" {
		t.Fatalf("moved = %q %v", got.MovedFrom, got.MovedAt)
	}

	// An error state and Gone. The outcome did not change the
	// representation: the stored body stays, whatever the state carries.
	st2 := got.SourceState
	st2.LastError, st2.LastStatus, st2.ConsecutiveErrors, st2.Gone, st2.Body = "HTTP 410", 410, 3, true, nil
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st2}))(t)
	got = must(s.Source(ctx, src.ID))(t)
	if !got.Gone || got.LastError != "HTTP 410" || got.ConsecutiveErrors != 3 || !bytes.Equal(got.Body, st.Body) ||
		!got.NextFetchAt.IsZero() {
		t.Fatalf("gone state = %+v", got.SourceState)
	}
}

func testFetchMovedKeepsSeen(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, n := newSource(t, s, "https://old.example/feed", "n")
	must(s.ApplyFetch(ctx, fetchOutcome(src, entry("1"), entry("2"))))(t)
	src = must(s.Source(ctx, src.ID))(t)
	out := fetchOutcome(src, entry("1"), entry("2"), entry("3"))
	out.State.URL, out.State.MovedFrom, out.State.MovedAt = "https://new.example/feed", "https://old.example/feed", t0
	applied := must(s.ApplyFetch(ctx, out))(t)
	if len(applied.New) != 1 || applied.New[0].ID != "3" {
		t.Fatalf("new after move = %+v", applied.New)
	}
	got := must(s.Source(ctx, src.ID))(t)
	if got.URL != "https://new.example/feed" || got.OriginalURL != "https://old.example/feed" ||
		got.MovedFrom != "https://old.example/feed" || !got.MovedAt.Equal(t0) {
		t.Fatalf("moved source = %+v", got)
	}
	if node := must(s.NodeByID(ctx, n.ID))(t); node.SourceURL != "https://new.example/feed" {
		t.Fatalf("node's source URL = %q", node.SourceURL)
	}
	applied = must(s.ApplyFetch(ctx, fetchOutcome(got, entry("1"), entry("2"), entry("3"))))(t)
	if len(applied.New) != 0 {
		t.Fatalf("seen ids lost in the move: %+v", applied.New)
	}
}

func testFetchPingDuringFetch(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := newSource(t, s, "https://example.org/feed", "n")
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0, nil))
	claimed := must(s.ClaimDueSources(ctx, t0, 1, "me", t0.Add(time.Minute)))(t)[0]
	// A ping arrives while the fetch runs; the fetch's schedule must not
	// hide it.
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0.Add(10*time.Second), nil))
	out := fetchOutcome(&claimed)
	out.State.NextFetchAt = t0.Add(time.Hour)
	must(s.ApplyFetch(ctx, out))(t)
	got := must(s.Source(ctx, src.ID))(t)
	if got.NextFetchAt.After(t0.Add(10 * time.Second)) {
		t.Fatalf("next fetch %v: the ping during the fetch was lost", got.NextFetchAt)
	}
	if !got.LastPingAt.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("last ping = %v", got.LastPingAt)
	}
	// Without a ping meanwhile the fetch's schedule stands.
	claimed = must(s.ClaimDueSources(ctx, t0.Add(time.Minute), 1, "me", t0.Add(2*time.Minute)))(t)[0]
	out = fetchOutcome(&claimed)
	out.State.NextFetchAt = t0.Add(time.Hour)
	must(s.ApplyFetch(ctx, out))(t)
	if got := must(s.Source(ctx, src.ID))(t); !got.NextFetchAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("next fetch = %v, want %v", got.NextFetchAt, t0.Add(time.Hour))
	}
}

func testFetchUnknownSource(t *testing.T, s store.Store) {
	_, err := s.ApplyFetch(ctxOf(t), hub.FetchOutcome{SourceID: 4242, Changed: true})
	wantErr(t, err, hub.ErrNotFound)
}

// numberedEntries are the entries prefix0 … prefix(n-1), oldest first.
func numberedEntries(prefix string, n int) []hub.Entry {
	out := make([]hub.Entry, n)
	for i := range out {
		out[i] = entry(fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// fetchAt is fetchOutcome at a fetch time of its own: the seen record
// tells fetches apart by it.
func fetchAt(src *hub.Source, at time.Time, entries ...hub.Entry) hub.FetchOutcome {
	o := fetchOutcome(src, entries...)
	o.State.LastFetchAt = at
	return o
}

// testFetchPublishesAtMostMaxItems: a fetch with 12,000 new entries (more
// than one document may carry; 50,000 would run into the store's
// transaction bound under the race detector) publishes to each node only
// the newest of them up to its max_items, and records every one as seen:
// none of them is new again.
func testFetchPublishesAtMostMaxItems(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := must2(s.EnsureSource(ctx, "https://example.org/flood"))(t)
	ten := newNode(t, s, "ten", withSource(src.ID), withMaxItems(10))
	three := newNode(t, s, "three", withSource(src.ID), withMaxItems(3))
	must(s.ApplyFetch(ctx, fetchAt(src, t0, entry("old"))))(t) // baseline

	const n = 12_000
	flood := numberedEntries("e", n)
	applied := must(s.ApplyFetch(ctx, fetchAt(src, t0.Add(time.Minute), flood...)))(t)
	if len(applied.New) != n || applied.Published != 13 || len(applied.Nodes) != 2 {
		t.Fatalf("applied: %d new, %d published to %v; want %d new, 13 published to 2 nodes",
			len(applied.New), applied.Published, applied.Nodes, n)
	}
	for _, want := range []struct {
		node *hub.Node
		ids  []string
	}{
		{ten, itemIDs(numberedEvents("e", n-10, n))},
		{three, itemIDs(numberedEvents("e", n-3, n))},
	} {
		equalStrings(t, "events of "+want.node.Name, itemIDs(told(t, s, want.node.ID)), want.ids)
	}
	if got := must(s.Source(ctx, src.ID))(t); got.LastNewItems != len(flood) {
		t.Errorf("LastNewItems = %d, want %d", got.LastNewItems, len(flood))
	}
	// Every one of them was recorded, the oldest as the newest: shown
	// again with one more, only that one is new.
	shown := append(slices.Clone(flood[:100]), flood[len(flood)-100:]...)
	again := must(s.ApplyFetch(ctx, fetchAt(src, t0.Add(2*time.Minute), append(shown, entry("next"))...)))(t)
	if len(again.New) != 1 || again.New[0].ID != "next" || again.Published != 2 {
		t.Fatalf("some of the flood again with one more: %d new, %d published", len(again.New), again.Published)
	}
}

// testFetchForgetsHiddenIDs: once a fetch recorded new ids, the ids it did
// not show are kept only up to hub.MaxHiddenSeen, the most recently shown
// first (those shown by one fetch go together), so a feed of ever new
// entries keeps a bounded record; a forgotten id shown again is new.
func testFetchForgetsHiddenIDs(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := newSource(t, s, "https://example.org/churn", "churn")
	batch := hub.MaxHiddenSeen * 6 / 10 // two batches are more than the bound, one is not
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
	must(s.ApplyFetch(ctx, fetchAt(src, at(0), numberedEntries("a", batch)...)))(t) // baseline
	must(s.ApplyFetch(ctx, fetchAt(src, at(1), numberedEntries("b", batch)...)))(t)
	must(s.ApplyFetch(ctx, fetchAt(src, at(2), numberedEntries("c", batch)...)))(t)
	// Hidden now: a (older) and b; a went. The feed shows a few of each
	// again: those of a are new, those of b and c are not.
	shown := []hub.Entry{entry("a1"), entry("a2"), entry("b1"), entry("c1")}
	applied := must(s.ApplyFetch(ctx, fetchAt(src, at(3), shown...)))(t)
	var fresh []string
	for _, e := range applied.New {
		fresh = append(fresh, e.ID)
	}
	equalStrings(t, "new after the churn", fresh, []string{"a1", "a2"})
}

// testFetchWithoutNodes: a source no node follows records what it shows
// and publishes nothing; a node that follows it later starts from there.
func testFetchWithoutNodes(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := must2(s.EnsureSource(ctx, "https://example.org/lonely"))(t)
	must(s.ApplyFetch(ctx, fetchAt(src, t0, entry("1"))))(t) // baseline
	applied := must(s.ApplyFetch(ctx, fetchAt(src, t0.Add(time.Minute), entry("1"), entry("2"))))(t)
	if len(applied.New) != 1 || applied.Published != 0 || len(applied.Nodes) != 0 {
		t.Fatalf("applied without nodes: %+v", applied)
	}
	n := newNode(t, s, "late", withSource(src.ID))
	applied = must(s.ApplyFetch(ctx, fetchAt(src, t0.Add(2*time.Minute), entry("1"), entry("2"), entry("3"))))(t)
	if applied.Published != 1 {
		t.Fatalf("published %d, want 1 (3)", applied.Published)
	}
	equalStrings(t, "events of the late node", itemIDs(must(s.EventsAfter(ctx, n.ID, 0, 0))(t)), []string{"3"})
}

// told returns the events of the node's log after its XMPP cursor: what
// its subscribers are told next (a baseline's kept items are before it).
func told(t *testing.T, s store.Store, nodeID int64) []hub.Event {
	t.Helper()
	n := must(s.NodeByID(ctxOf(t), nodeID))(t)
	return must(s.EventsAfter(ctxOf(t), nodeID, n.XMPPSeq, 0))(t)
}

// testNextSourceDue: the next due time is the earliest after now of the
// followed sources that are not gone; sources due already, unfollowed or
// gone do not count, and with none left it is zero.
func testNextSourceDue(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	schedule := func(src *hub.Source, at time.Time, gone bool) {
		t.Helper()
		o := fetchAt(src, t0.Add(-time.Hour))
		o.State.NextFetchAt, o.State.Gone = at, gone
		must(s.ApplyFetch(ctx, o))(t)
	}
	if next := must(s.NextSourceDue(ctx, t0))(t); !next.IsZero() {
		t.Fatalf("next due %v on an empty store, want none", next)
	}
	due, _ := newSource(t, s, "https://a.example/due", "due")
	schedule(due, t0.Add(-time.Minute), false)
	later, _ := newSource(t, s, "https://a.example/later", "later")
	schedule(later, t0.Add(30*time.Second), false)
	soon, _ := newSource(t, s, "https://a.example/soon", "soon")
	schedule(soon, t0.Add(10*time.Second), false)
	gone, _ := newSource(t, s, "https://a.example/gone", "gone")
	schedule(gone, t0.Add(time.Second), true)
	lonely, _ := must2(s.EnsureSource(ctx, "https://a.example/lonely"))(t)
	schedule(lonely, t0.Add(2*time.Second), false)

	if next := must(s.NextSourceDue(ctx, t0))(t); !next.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("next due %v, want %v", next, t0.Add(10*time.Second))
	}
	if next := must(s.NextSourceDue(ctx, t0.Add(10*time.Second)))(t); !next.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("next due after the first %v, want %v", next, t0.Add(30*time.Second))
	}
	if next := must(s.NextSourceDue(ctx, t0.Add(time.Minute)))(t); !next.IsZero() {
		t.Fatalf("next due %v when every source is due, want none", next)
	}
}
