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

func testEnsureSource(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	const u = "https://example.org/feed.xml"
	src, created := must2(s.EnsureSource(ctx, u))(t)
	if !created || src.ID == 0 || src.OriginalURL != u || src.URL != u || src.Baselined || src.CreatedAt.IsZero() {
		t.Fatalf("new source = %+v, created %v", src, created)
	}
	again, created := must2(s.EnsureSource(ctx, u))(t)
	if created || again.ID != src.ID {
		t.Fatalf("second EnsureSource = %d, created %v", again.ID, created)
	}
	got := must(s.Source(ctx, src.ID))(t)
	if got.URL != u || got.PendingNote != nil || got.LeaseOwner != "" || !got.LeaseUntil.IsZero() || !got.NextFetchAt.IsZero() {
		t.Fatalf("Source = %+v", got)
	}
	_, err := s.Source(ctx, src.ID+1000)
	wantErr(t, err, hub.ErrNotFound)

	// Many callers at once get one source.
	var wg sync.WaitGroup
	ids := make([]int64, 8)
	createdCount := make([]bool, 8)
	for i := range ids {
		wg.Go(func() {
			src, c, err := s.EnsureSource(ctx, "https://example.org/other.xml")
			if err != nil {
				t.Error(err)
				return
			}
			ids[i], createdCount[i] = src.ID, c
		})
	}
	wg.Wait()
	n := 0
	for i := range ids {
		if ids[i] != ids[0] {
			t.Fatalf("concurrent EnsureSource gave ids %v", ids)
		}
		if createdCount[i] {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d callers were told they created the source", n)
	}
}

// newSource makes a source followed by a new node.
func newSource(t *testing.T, s store.Store, url, node string) (*hub.Source, *hub.Node) {
	t.Helper()
	src, _ := must2(s.EnsureSource(ctxOf(t), url))(t)
	n := newNode(t, s, node, withSource(src.ID))
	return src, n
}

func testSourcesMatching(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	followed, _ := newSource(t, s, "https://a.example/feed", "a")
	lonely, _ := must2(s.EnsureSource(ctx, "https://b.example/feed"))(t)

	// Give the followed source a site and a new home.
	st := followed.SourceState
	st.URL = "https://a.example/new-feed"
	st.MovedFrom = "https://a.example/feed"
	st.MovedAt = t0
	st.SiteURL = "https://a.example/"
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: followed.ID, State: st}))(t)

	for _, u := range []string{"https://a.example/feed", "https://a.example/new-feed", "https://a.example/"} {
		got := must(s.SourcesMatching(ctx, u))(t)
		if len(got) != 1 || got[0].ID != followed.ID {
			t.Fatalf("SourcesMatching(%s) = %+v", u, got)
		}
	}
	if got := must(s.SourcesMatching(ctx, "https://c.example/"))(t); len(got) != 0 {
		t.Fatalf("unknown URL matched %+v", got)
	}
	if got := must(s.SourcesMatching(ctx, ""))(t); len(got) != 0 {
		t.Fatalf("empty URL matched %+v", got)
	}
	// EnsureSource finds a source by its current URL too.
	found, created := must2(s.EnsureSource(ctx, "https://a.example/new-feed"))(t)
	if created || found.ID != followed.ID {
		t.Fatalf("EnsureSource(current URL) = %d, created %v", found.ID, created)
	}

	all := must(s.Sources(ctx))(t)
	if len(all) != 1 || all[0].ID != followed.ID {
		t.Fatalf("Sources = %+v, want only the followed one (not %d)", all, lonely.ID)
	}
}

func testMarkSourceDue(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := newSource(t, s, "https://example.org/feed", "n")
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0, nil))
	got := must(s.Source(ctx, src.ID))(t)
	if !got.NextFetchAt.Equal(t0) || !got.LastPingAt.Equal(t0) || got.PendingNote != nil {
		t.Fatalf("after MarkSourceDue: next %v ping %v note %v", got.NextFetchAt, got.LastPingAt, got.PendingNote)
	}
	// Later due times do not postpone; earlier ones advance.
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0.Add(time.Hour), &hub.ChangeNote{Title: "T", Description: "D"}))
	got = must(s.Source(ctx, src.ID))(t)
	if !got.NextFetchAt.Equal(t0) || !got.LastPingAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("later mark: next %v ping %v", got.NextFetchAt, got.LastPingAt)
	}
	if got.PendingNote == nil || *got.PendingNote != (hub.ChangeNote{Title: "T", Description: "D"}) {
		t.Fatalf("note = %+v", got.PendingNote)
	}
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0.Add(-time.Hour), nil))
	got = must(s.Source(ctx, src.ID))(t)
	if !got.NextFetchAt.Equal(t0.Add(-time.Hour)) {
		t.Fatalf("earlier mark: next %v", got.NextFetchAt)
	}
	if got.PendingNote == nil {
		t.Fatal("a mark without a note dropped the pending note")
	}
	wantErr(t, s.MarkSourceDue(ctx, src.ID+1000, t0, nil), hub.ErrNotFound)
}

func testScheduleSource(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := newSource(t, s, "https://example.org/feed", "n")
	noErr(t, s.ScheduleSource(ctx, src.ID, t0, "new source"))
	got := must(s.Source(ctx, src.ID))(t)
	if !got.NextFetchAt.Equal(t0) || got.NextFetchReason != "new source" || !got.LastPingAt.IsZero() {
		t.Fatalf("after ScheduleSource: next %v reason %q ping %v", got.NextFetchAt, got.NextFetchReason, got.LastPingAt)
	}
	// A later time neither postpones nor renames; an earlier one does both.
	noErr(t, s.ScheduleSource(ctx, src.ID, t0.Add(time.Hour), "later"))
	got = must(s.Source(ctx, src.ID))(t)
	if !got.NextFetchAt.Equal(t0) || got.NextFetchReason != "new source" {
		t.Fatalf("later schedule: next %v reason %q", got.NextFetchAt, got.NextFetchReason)
	}
	noErr(t, s.ScheduleSource(ctx, src.ID, t0.Add(-time.Hour), "sooner"))
	got = must(s.Source(ctx, src.ID))(t)
	if !got.NextFetchAt.Equal(t0.Add(-time.Hour)) || got.NextFetchReason != "sooner" || !got.LastPingAt.IsZero() {
		t.Fatalf("earlier schedule: next %v reason %q ping %v", got.NextFetchAt, got.NextFetchReason, got.LastPingAt)
	}
	wantErr(t, s.ScheduleSource(ctx, src.ID+1000, t0, "x"), hub.ErrNotFound)
}

// testReviveSource: a gone source is claimed again once revived; a live
// one is left as it is.
func testReviveSource(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := newSource(t, s, "https://example.org/gone", "n")
	st := src.SourceState
	st.Gone, st.Baselined = true, true
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st}))(t)
	if got := must(s.ClaimDueSources(ctx, t0, 10, "me", t0.Add(time.Minute)))(t); len(got) != 0 {
		t.Fatalf("claimed a gone source: %+v", got)
	}
	if revived := must(s.ReviveSource(ctx, src.ID, t0, "node created"))(t); !revived {
		t.Fatal("a gone source was not revived")
	}
	got := must(s.Source(ctx, src.ID))(t)
	if got.Gone || !got.NextFetchAt.Equal(t0) || got.NextFetchReason != "node created" || !got.Baselined {
		t.Fatalf("revived source = %+v", got.SourceState)
	}
	if claimed := must(s.ClaimDueSources(ctx, t0, 10, "me", t0.Add(time.Minute)))(t); len(claimed) != 1 || claimed[0].ID != src.ID {
		t.Fatalf("claimed %v after the revival", sourceIDs(claimed))
	}
	// Live: nothing changes.
	if revived := must(s.ReviveSource(ctx, src.ID, t0.Add(time.Hour), "again"))(t); revived {
		t.Fatal("a live source was revived")
	}
	if got := must(s.Source(ctx, src.ID))(t); got.NextFetchReason != "node created" {
		t.Fatalf("a live source was rescheduled: %q", got.NextFetchReason)
	}
	_, err := s.ReviveSource(ctx, src.ID+1000, t0, "x")
	wantErr(t, err, hub.ErrNotFound)
}

// testForgetSeenEntries: the ids a source stopped showing long before its
// latest fetch are forgotten (and new again if they come back); those it
// still shows, and every id of a source that has not changed, are kept.
func testForgetSeenEntries(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	day := 24 * time.Hour
	fetch := func(src *hub.Source, at time.Time, ids ...string) []string {
		t.Helper()
		st := src.SourceState
		st.LastFetchAt = at
		var entries []hub.Entry
		for _, id := range ids {
			entries = append(entries, hub.Entry{ID: id})
		}
		applied := must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st, Changed: true, Entries: entries}))(t)
		var fresh []string
		for _, e := range applied.New {
			fresh = append(fresh, e.ID)
		}
		return fresh
	}
	busy, _ := newSource(t, s, "https://example.org/busy", "busy")
	still, _ := newSource(t, s, "https://example.org/still", "still")
	fetch(busy, t0, "old", "kept")              // baseline
	fetch(still, t0, "x", "y")                  // baseline, never changes again
	fetch(busy, t0.Add(50*day), "kept", "mid")  // "old" leaves the feed
	fetch(busy, t0.Add(100*day), "kept", "new") // "mid" leaves too

	n := must(s.ForgetSeenEntries(ctx, 90*day))(t)
	if n != 1 {
		t.Fatalf("forgot %d ids, want 1 (old)", n)
	}
	// "old" is new again; "mid" (left 50 days before the latest fetch) and
	// "kept" (still shown) are not; the unchanging source kept its ids.
	if got := fetch(busy, t0.Add(101*day), "old", "mid", "kept", "new"); !slices.Equal(got, []string{"old"}) {
		t.Errorf("new after forgetting: %v, want [old]", got)
	}
	if got := fetch(still, t0.Add(200*day), "x", "y"); len(got) != 0 {
		t.Errorf("an unchanging source's ids were forgotten: %v new", got)
	}
	if n := must(s.ForgetSeenEntries(ctx, 90*day))(t); n != 0 {
		t.Errorf("forgot %d more", n)
	}
}

func testClaimDueSources(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	due, _ := newSource(t, s, "https://example.org/due", "due")
	later, _ := newSource(t, s, "https://example.org/later", "later")
	gone, _ := newSource(t, s, "https://example.org/gone", "gone")
	lonely, _ := must2(s.EnsureSource(ctx, "https://example.org/lonely"))(t)
	newSource(t, s, "https://example.org/never", "never") // never marked due

	noErr(t, s.MarkSourceDue(ctx, due.ID, t0.Add(-time.Minute), nil))
	noErr(t, s.MarkSourceDue(ctx, later.ID, t0.Add(time.Minute), nil))
	noErr(t, s.MarkSourceDue(ctx, lonely.ID, t0.Add(-time.Minute), nil))
	noErr(t, s.MarkSourceDue(ctx, gone.ID, t0.Add(-time.Minute), nil))
	st := gone.SourceState
	st.Gone = true
	st.NextFetchAt = t0.Add(-time.Minute) // even with a due time, gone is never fetched
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: gone.ID, State: st}))(t)

	lease := t0.Add(time.Minute)
	claimed := must(s.ClaimDueSources(ctx, t0, 10, "one", lease))(t)
	if len(claimed) != 1 || claimed[0].ID != due.ID {
		t.Fatalf("claimed %+v, want only %d", claimed, due.ID)
	}
	if claimed[0].LeaseOwner != "one" || !claimed[0].LeaseUntil.Equal(lease) || claimed[0].URL != "https://example.org/due" {
		t.Fatalf("claimed source = %+v", claimed[0])
	}
	// Nobody else, nor the owner again, gets it while the lease lives.
	if got := must(s.ClaimDueSources(ctx, t0.Add(30*time.Second), 10, "two", t0.Add(2*time.Minute)))(t); len(got) != 0 {
		t.Fatalf("second owner claimed %+v during the lease", got)
	}
	if got := must(s.ClaimDueSources(ctx, t0.Add(30*time.Second), 10, "one", t0.Add(2*time.Minute)))(t); len(got) != 0 {
		t.Fatalf("owner re-claimed %+v during its own lease", got)
	}
	// After the lease expires another owner takes over (and the later
	// source has come due).
	got := must(s.ClaimDueSources(ctx, lease, 10, "two", lease.Add(time.Minute)))(t)
	if ids := sourceIDs(got); !slices.Equal(ids, []int64{due.ID, later.ID}) {
		t.Fatalf("after expiry claimed %v, want [%d %d]", ids, due.ID, later.ID)
	}
	for _, src := range got {
		if src.LeaseOwner != "two" {
			t.Fatalf("lease owner %q", src.LeaseOwner)
		}
	}
	// Applying the fetch releases the lease.
	st = got[0].SourceState
	st.NextFetchAt = lease.Add(time.Hour)
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: due.ID, State: st, Owner: "two"}))(t)
	released := must(s.Source(ctx, due.ID))(t)
	if released.LeaseOwner != "" || !released.LeaseUntil.IsZero() || !released.NextFetchAt.Equal(lease.Add(time.Hour)) {
		t.Fatalf("after ApplyFetch: owner %q until %v next %v", released.LeaseOwner, released.LeaseUntil, released.NextFetchAt)
	}
	if got := must(s.ClaimDueSources(ctx, lease.Add(30*time.Second), 10, "three", lease.Add(2*time.Minute)))(t); len(got) != 0 {
		t.Fatalf("claimed %v before their next fetch", sourceIDs(got))
	}

	// limit bounds the claim, earliest due first.
	var many []int64
	for i := range 5 {
		src, _ := newSource(t, s, fmt.Sprintf("https://example.org/many/%d", i), fmt.Sprintf("many-%d", i))
		noErr(t, s.MarkSourceDue(ctx, src.ID, t0.Add(time.Duration(10-i)*time.Second), nil))
		many = append(many, src.ID)
	}
	got = must(s.ClaimDueSources(ctx, t0.Add(time.Minute), 2, "four", t0.Add(time.Hour)))(t)
	if ids := sourceIDs(got); !slices.Equal(ids, []int64{many[4], many[3]}) {
		t.Fatalf("limited claim = %v, want [%d %d]", ids, many[4], many[3])
	}
	if got := must(s.ClaimDueSources(ctx, t0, 0, "four", t0.Add(time.Hour)))(t); len(got) != 0 {
		t.Fatalf("limit 0 claimed %d", len(got))
	}
}

func sourceIDs(srcs []hub.Source) []int64 {
	out := make([]int64, 0, len(srcs))
	for _, s := range srcs {
		out = append(out, s.ID)
	}
	return out
}

// testClaimDueSourcesConcurrent has several owners claim at once: every
// due source goes to exactly one of them.
func testClaimDueSourcesConcurrent(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	const sources, owners = 30, 4
	for i := range sources {
		src, _ := newSource(t, s, fmt.Sprintf("https://example.org/%d", i), fmt.Sprintf("n%d", i))
		noErr(t, s.MarkSourceDue(ctx, src.ID, t0, nil))
	}
	var mu sync.Mutex
	owner := map[int64]string{}
	var wg sync.WaitGroup
	for o := range owners {
		name := fmt.Sprintf("owner-%d", o)
		wg.Go(func() {
			for {
				got, err := s.ClaimDueSources(ctx, t0, 3, name, t0.Add(time.Hour))
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, src := range got {
					if prev, ok := owner[src.ID]; ok {
						t.Errorf("source %d claimed by %s and %s", src.ID, prev, name)
					}
					owner[src.ID] = name
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(owner) != sources {
		t.Fatalf("%d sources claimed, want %d", len(owner), sources)
	}
}
