package storetest

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// claimOne marks the source due at `at` and claims it.
func claimOne(t *testing.T, s store.Store, id int64, at time.Time) hub.Source {
	t.Helper()
	ctx := ctxOf(t)
	noErr(t, s.MarkSourceDue(ctx, id, at, nil))
	for _, src := range must(s.ClaimDueSources(ctx, at, 100, "me", at.Add(time.Minute)))(t) {
		if src.ID == id {
			return src
		}
	}
	t.Fatalf("source %d not claimed at %v", id, at)
	return hub.Source{}
}

// testApplyUnchangedFetches: several unchanged outcomes are stored at once
// as ApplyFetch would store each, the representation left alone.
func testApplyUnchangedFetches(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	a, _ := newSource(t, s, "https://a.example/feed", "a")
	b, _ := newSource(t, s, "https://b.example/feed", "b")
	gone, _ := newSource(t, s, "https://c.example/feed", "c")
	// Each has a representation from an earlier fetch.
	for _, src := range []*hub.Source{a, b, gone} {
		out := fetchOutcome(src, entry("1"))
		out.State.Body, out.State.BodyHash, out.State.Title = []byte("<rss>"+src.URL+"</rss>"), "sha256:"+src.URL, "T "+src.URL
		must(s.ApplyFetch(ctx, out))(t)
	}
	ca, cb, cg := claimOne(t, s, a.ID, t0), claimOne(t, s, b.ID, t0), claimOne(t, s, gone.ID, t0)

	// a: a 304 with a new validator and hints; b: an error; c: gone.
	stA := ca.SourceState
	stA.ETag, stA.LastFetchAt, stA.LastStatus, stA.LastBytes, stA.Unchanged = `"v2"`, t0, 304, 120, 3
	stA.Hints.MaxAge = 10 * time.Minute
	stA.NextFetchAt, stA.NextFetchReason = t0.Add(time.Hour), "ttl"
	stB := cb.SourceState
	stB.LastFetchAt, stB.LastStatus, stB.LastError, stB.ConsecutiveErrors = t0, 500, "HTTP 500", 2
	stB.NextFetchAt, stB.NextFetchReason = t0.Add(20*time.Minute), "error backoff"
	stG := cg.SourceState
	stG.LastFetchAt, stG.LastStatus, stG.Gone = t0, 410, true
	stG.NextFetchAt, stG.NextFetchReason = t0.Add(time.Hour), "gone"
	noErr(t, s.ApplyUnchangedFetches(ctx, []hub.FetchOutcome{
		{SourceID: a.ID, State: stA, Owner: "me"}, {SourceID: b.ID, State: stB, Owner: "me"}, {SourceID: gone.ID, State: stG, Owner: "me"},
		{SourceID: 424242, State: stA, Owner: "me"}, // removed meanwhile: skipped
	}))

	got := must(s.Source(ctx, a.ID))(t)
	if got.ETag != `"v2"` || got.LastStatus != 304 || got.LastBytes != 120 || got.Unchanged != 3 ||
		!got.LastFetchAt.Equal(t0) || !got.NextFetchAt.Equal(t0.Add(time.Hour)) || got.NextFetchReason != "ttl" ||
		got.Hints.MaxAge != 10*time.Minute || got.LeaseOwner != "" || !got.LeaseUntil.IsZero() {
		t.Fatalf("a after a 304: %+v lease %q %v", got.SourceState, got.LeaseOwner, got.LeaseUntil)
	}
	if !bytes.Equal(got.Body, []byte("<rss>"+a.URL+"</rss>")) || got.BodyHash != "sha256:"+a.URL || got.Title != "T "+a.URL ||
		!got.Baselined || !got.IsFeed {
		t.Fatalf("a's representation changed: body %q hash %q title %q", got.Body, got.BodyHash, got.Title)
	}
	got = must(s.Source(ctx, b.ID))(t)
	if got.LastError != "HTTP 500" || got.ConsecutiveErrors != 2 || got.LastStatus != 500 ||
		!got.NextFetchAt.Equal(t0.Add(20*time.Minute)) || got.NextFetchReason != "error backoff" || got.LeaseOwner != "" ||
		len(got.Body) == 0 {
		t.Fatalf("b after an error: %+v", got.SourceState)
	}
	got = must(s.Source(ctx, gone.ID))(t)
	if !got.Gone || !got.NextFetchAt.IsZero() || got.LeaseOwner != "" {
		t.Fatalf("c after a 410: gone %v next %v lease %q", got.Gone, got.NextFetchAt, got.LeaseOwner)
	}
	if claimed := must(s.ClaimDueSources(ctx, t0.Add(30*time.Minute), 10, "me", t0.Add(time.Hour)))(t); len(claimed) != 1 || claimed[0].ID != b.ID {
		t.Fatalf("claim after the batch: %v, want only b (due again after its backoff)", sourceIDs(claimed))
	}

	// An outcome with something to publish is refused, and the batch with it.
	changed := fetchOutcome(got, entry("2"))
	before := must(s.Source(ctx, a.ID))(t)
	stA2 := before.SourceState
	stA2.ETag = `"v3"`
	err := s.ApplyUnchangedFetches(ctx, []hub.FetchOutcome{{SourceID: a.ID, State: stA2}, changed})
	wantErr(t, err, hub.ErrInvalid)
	if got := must(s.Source(ctx, a.ID))(t); got.ETag != `"v2"` {
		t.Fatalf("a refused batch wrote a's state: etag %q", got.ETag)
	}
	noErr(t, s.ApplyUnchangedFetches(ctx, nil))
}

// testApplyUnchangedFetchesPingDuringFetch: a ping stored while the fetch
// ran makes the source due at the ping (hub.NextFetchAfter), and a note
// it brought stays for the next fetch.
func testApplyUnchangedFetchesPingDuringFetch(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	pinged, _ := newSource(t, s, "https://a.example/feed", "a")
	quiet, _ := newSource(t, s, "https://b.example/feed", "b")
	soon, _ := newSource(t, s, "https://c.example/feed", "c")
	cp, cq, cs := claimOne(t, s, pinged.ID, t0), claimOne(t, s, quiet.ID, t0), claimOne(t, s, soon.ID, t0)
	ping := t0.Add(10 * time.Second)
	noErr(t, s.MarkSourceDue(ctx, pinged.ID, ping, &hub.ChangeNote{Title: "meanwhile"}))
	noErr(t, s.MarkSourceDue(ctx, soon.ID, ping, nil))

	outs := make([]hub.FetchOutcome, 0, 3)
	for _, c := range []hub.Source{cp, cq, cs} {
		st := c.SourceState
		st.LastFetchAt, st.LastStatus, st.Unchanged = t0.Add(time.Second), 304, 1
		st.NextFetchAt, st.NextFetchReason = t0.Add(time.Hour), "ttl"
		if c.ID == soon.ID {
			st.NextFetchAt = t0.Add(5 * time.Second) // due before the ping: stays
		}
		outs = append(outs, hub.FetchOutcome{SourceID: c.ID, State: st, Owner: c.LeaseOwner})
	}
	noErr(t, s.ApplyUnchangedFetches(ctx, outs))

	got := must(s.Source(ctx, pinged.ID))(t)
	if !got.NextFetchAt.Equal(ping) || !got.LastPingAt.Equal(ping) {
		t.Fatalf("pinged during the fetch: next %v, last ping %v; want both %v", got.NextFetchAt, got.LastPingAt, ping)
	}
	if got.PendingNote == nil || got.PendingNote.Title != "meanwhile" {
		t.Fatalf("the note that came during the fetch was dropped: %+v", got.PendingNote)
	}
	if got := must(s.Source(ctx, quiet.ID))(t); !got.NextFetchAt.Equal(t0.Add(time.Hour)) || !got.LastPingAt.Equal(t0) {
		t.Fatalf("not pinged: next %v, last ping %v; want %v, %v", got.NextFetchAt, got.LastPingAt, t0.Add(time.Hour), t0)
	}
	if got := must(s.Source(ctx, soon.ID))(t); !got.NextFetchAt.Equal(t0.Add(5*time.Second)) || !got.LastPingAt.Equal(ping) {
		t.Fatalf("due before the ping: next %v, last ping %v", got.NextFetchAt, got.LastPingAt)
	}
}

// testApplyUnchangedFetchesMany writes more outcomes than one statement
// takes.
func testApplyUnchangedFetchesMany(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	const n = 150
	for i := range n {
		src, _ := newSource(t, s, fmt.Sprintf("https://example.org/%d", i), fmt.Sprintf("n%d", i))
		noErr(t, s.MarkSourceDue(ctx, src.ID, t0, nil))
	}
	claimed := must(s.ClaimDueSources(ctx, t0, n, "me", t0.Add(time.Minute)))(t)
	if len(claimed) != n {
		t.Fatalf("claimed %d of %d", len(claimed), n)
	}
	outs := make([]hub.FetchOutcome, 0, n)
	for i, c := range claimed {
		st := c.SourceState
		st.LastFetchAt, st.LastStatus = t0, 304
		st.NextFetchAt, st.NextFetchReason = t0.Add(time.Duration(i+1)*time.Minute), "default interval"
		outs = append(outs, hub.FetchOutcome{SourceID: c.ID, State: st, Owner: c.LeaseOwner})
	}
	noErr(t, s.ApplyUnchangedFetches(ctx, outs))
	for i, c := range claimed {
		got := must(s.Source(ctx, c.ID))(t)
		if got.LeaseOwner != "" || got.LastStatus != 304 || !got.NextFetchAt.Equal(t0.Add(time.Duration(i+1)*time.Minute)) {
			t.Fatalf("source %d of %d: lease %q status %d next %v", i, n, got.LeaseOwner, got.LastStatus, got.NextFetchAt)
		}
	}
}

// testClaimCountsSubscribers: a claim brings each source's subscriber
// count, every kind over every node following it.
func testClaimCountsSubscribers(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	followed, a := newSource(t, s, "https://a.example/feed", "a")
	b := newNode(t, s, "b", withSource(followed.ID))
	lonely, _ := newSource(t, s, "https://b.example/feed", "lonely")
	for i, k := range hub.Kinds {
		must(s.PutSubscription(ctx, &hub.Subscription{NodeID: a.ID, Kind: k, Address: fmt.Sprintf("addr-%d", i), BareJID: "x@example.org"}))(t)
	}
	must(s.PutSubscription(ctx, &hub.Subscription{NodeID: b.ID, Kind: hub.KindXMPP, Address: "y@example.org", BareJID: "y@example.org"}))(t)
	noErr(t, s.MarkSourceDue(ctx, followed.ID, t0, nil))
	noErr(t, s.MarkSourceDue(ctx, lonely.ID, t0, nil))
	claimed := must(s.ClaimDueSources(ctx, t0, 10, "me", t0.Add(time.Minute)))(t)
	counts := map[int64]int{}
	for _, c := range claimed {
		counts[c.ID] = c.Subscribers
	}
	if len(claimed) != 2 || counts[followed.ID] != len(hub.Kinds)+1 || counts[lonely.ID] != 0 {
		t.Fatalf("claimed counts %v, want %d for %d and 0 for %d", counts, len(hub.Kinds)+1, followed.ID, lonely.ID)
	}
}

// testSourceBody: a source's last body is read by Source and SourceBody
// (for FetchRequest.LoadPrevious), by nothing that lists or claims
// sources, left alone by every outcome that did not change the
// representation whatever its state carries, and replaced by one that did.
func testSourceBody(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := newSource(t, s, "https://a.example/feed", "a")
	v1, v2 := []byte("<rss>one</rss>"), []byte("<rss>two</rss>")
	first := fetchOutcome(src, entry("1"))
	first.State.Body, first.State.BodyHash = v1, "hash of one"
	must(s.ApplyFetch(ctx, first))(t)

	body := func(when string, want []byte) {
		t.Helper()
		if got := must(s.Source(ctx, src.ID))(t); !bytes.Equal(got.Body, want) {
			t.Fatalf("%s: body %q, want %q", when, got.Body, want)
		}
		if got := must(s.SourceBody(ctx, src.ID))(t); !bytes.Equal(got, want) {
			t.Fatalf("%s: SourceBody %q, want %q", when, got, want)
		}
	}
	body("after the first fetch", v1)
	for _, listed := range [][]hub.Source{must(s.Sources(ctx))(t), must(s.SourcesMatching(ctx, src.URL))(t)} {
		if len(listed) != 1 || listed[0].Body != nil {
			t.Fatalf("a list of sources read the body: %d sources, body %q", len(listed), listed[0].Body)
		}
	}

	claimed := claimOne(t, s, src.ID, t0)
	if claimed.Body != nil || claimed.BodyHash == "" {
		t.Fatalf("the claim brought body %q and hash %q, want no body and its hash", claimed.Body, claimed.BodyHash)
	}
	// A batch of unchanged outcomes, one of them carrying no body (as a
	// source read without it does).
	st := claimed.SourceState
	st.LastFetchAt, st.LastStatus, st.Body = t0, 304, nil
	st.NextFetchAt, st.NextFetchReason = t0.Add(time.Hour), "ttl"
	noErr(t, s.ApplyUnchangedFetches(ctx, []hub.FetchOutcome{{SourceID: src.ID, State: st, Owner: "me"}}))
	body("after an unchanged batch", v1)
	// ApplyFetch without a change (a note, a release) leaves it too.
	st.Body = []byte("not the representation")
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st, Note: &hub.ChangeNote{Title: "pinged"}}))(t)
	body("after an unchanged fetch with a note", v1)
	st.Body = nil
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st}))(t)
	body("after a release", v1)

	// A changed fetch replaces it, and the next claim brings the new one.
	changed := fetchOutcome(must(s.Source(ctx, src.ID))(t), entry("2"))
	changed.State.Body = v2
	must(s.ApplyFetch(ctx, changed))(t)
	body("after a changed fetch", v2)
	if claimed := claimOne(t, s, src.ID, t0.Add(2*time.Hour)); claimed.Body != nil {
		t.Fatalf("the claim after a change brought body %q, want none", claimed.Body)
	}
	// A changed representation without a body keeps none.
	changed.State.Body, changed.Owner = nil, "me"
	must(s.ApplyFetch(ctx, changed))(t)
	body("after a change to an empty body", nil)
	if got, err := s.SourceBody(ctx, src.ID+1000); err != nil || got != nil {
		t.Fatalf("SourceBody of a source that does not exist: %q, %v; want nothing, no error", got, err)
	}
}

// testSourcesLeasedByOthers: only the live leases of other owners are
// listed, not this owner's, not lapsed ones, not unleased sources.
func testSourcesLeasedByOthers(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	theirs, _ := newSource(t, s, "https://a.example/feed", "a")
	lapsed, _ := newSource(t, s, "https://b.example/feed", "b")
	mine, _ := newSource(t, s, "https://c.example/feed", "c")
	newSource(t, s, "https://d.example/feed", "d") // never leased
	lease := func(src *hub.Source, owner string, until time.Time) {
		t.Helper()
		noErr(t, s.MarkSourceDue(ctx, src.ID, t0, nil))
		got := must(s.ClaimDueSources(ctx, t0, 1, owner, until))(t)
		if len(got) != 1 || got[0].ID != src.ID {
			t.Fatalf("claim of %d by %s: %v", src.ID, owner, got)
		}
	}
	lease(theirs, "earlier", t0.Add(time.Hour))
	lease(lapsed, "earlier", t0.Add(time.Minute))
	lease(mine, "me", t0.Add(time.Hour))
	got := must(s.SourcesLeasedByOthers(ctx, "me", t0.Add(10*time.Minute)))(t)
	if len(got) != 1 || got[0].ID != theirs.ID || got[0].LeaseOwner != "earlier" || got[0].Body != nil {
		t.Fatalf("leased by others: %+v, want source %d alone, without its body", got, theirs.ID)
	}
	if got := must(s.SourcesLeasedByOthers(ctx, "earlier", t0.Add(10*time.Minute)))(t); len(got) != 1 || got[0].ID != mine.ID {
		t.Fatalf("leased by others than earlier: %+v, want source %d", got, mine.ID)
	}
}
