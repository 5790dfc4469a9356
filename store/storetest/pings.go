package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

func testPings(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	var ids []int64
	for i := range 5 {
		p := &hub.Ping{Dialect: "xmlrpc-weblogupdates", Name: fmt.Sprintf("blog %d", i),
			URL: fmt.Sprintf("https://example.org/%d", i), Remote: "127.0.0.1", ReceivedAt: t0.Add(time.Duration(i) * time.Minute)}
		noErr(t, s.RecordPing(ctx, p))
		if p.ID == 0 {
			t.Fatal("RecordPing did not set the ID")
		}
		ids = append(ids, p.ID)
	}
	pings, total := must2(s.Pings(ctx, t0.Add(2*time.Minute), 0))(t)
	if total != 5 || len(pings) != 3 || pings[0].URL != "https://example.org/4" || pings[2].URL != "https://example.org/2" {
		t.Fatalf("pings since +2m: total %d, %+v", total, pings)
	}
	p := pings[0]
	if p.ID != ids[4] || p.Dialect != "xmlrpc-weblogupdates" || p.Name != "blog 4" || p.Remote != "127.0.0.1" ||
		!p.ReceivedAt.Equal(t0.Add(4*time.Minute)) || p.ReceivedAt.Location() != time.UTC {
		t.Fatalf("ping = %+v", p)
	}
	pings, _ = must2(s.Pings(ctx, time.Time{}, 2))(t)
	if len(pings) != 2 || pings[0].ID != ids[4] || pings[1].ID != ids[3] {
		t.Fatalf("limited pings = %+v", pings)
	}
	// The total counts pings ever received, pruned ones too.
	noErr(t, s.Prune(ctx, t0.Add(3*time.Minute)))
	pings, total = must2(s.Pings(ctx, time.Time{}, 0))(t)
	if total != 5 || len(pings) != 2 {
		t.Fatalf("after prune: total %d, %d pings", total, len(pings))
	}
	// A ping without a time gets one.
	p = hub.Ping{Dialect: "rest", URL: "https://example.org/now"}
	noErr(t, s.RecordPing(ctx, &p))
	if p.ReceivedAt.IsZero() {
		t.Fatal("ReceivedAt not set")
	}
	// An extendedPing keeps the weblog's URL and its feed apart.
	p = hub.Ping{Dialect: "xmlrpc-extended", URL: "https://example.org/", FeedURL: "https://example.org/feed.xml", ReceivedAt: t0.Add(time.Hour)}
	noErr(t, s.RecordPing(ctx, &p))
	pings, _ = must2(s.PingsBetween(ctx, t0.Add(time.Hour), t0.Add(2*time.Hour), 0))(t)
	if len(pings) != 1 || pings[0].URL != "https://example.org/" || pings[0].FeedURL != "https://example.org/feed.xml" {
		t.Fatalf("extendedPing read back as %+v", pings)
	}
}

// testRecordPingMarkingDue: a ping and the due times of the sources it
// names are stored together; gone sources and unknown URLs are left out,
// and a source named twice (its feed and its site) is counted once.
func testRecordPingMarkingDue(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	moved, _ := newSource(t, s, "https://a.example/feed", "a")
	st := moved.SourceState
	st.URL = "https://a.example/new-feed"
	st.MovedFrom = "https://a.example/feed"
	st.MovedAt = t0
	st.SiteURL = "https://a.example/"
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: moved.ID, State: st}))(t)
	other, _ := newSource(t, s, "https://b.example/feed", "b")
	noErr(t, s.MarkSourceDue(ctx, other.ID, t0.Add(-time.Hour), nil)) // due sooner already
	gone, _ := newSource(t, s, "https://c.example/feed", "c")
	st = gone.SourceState
	st.Gone = true
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: gone.ID, State: st}))(t)
	_, before := must2(s.Pings(ctx, time.Time{}, 1))(t)

	p := &hub.Ping{Dialect: "xmlrpc-extended", Name: "A", URL: "https://a.example/", FeedURL: "https://a.example/feed", ReceivedAt: t0}
	urls := []string{"https://a.example/", "https://a.example/feed", "https://a.example/new-feed",
		"https://b.example/feed", "https://c.example/feed", "https://unknown.example/"}
	note := &hub.ChangeNote{Title: "T", Description: "D"}
	marked := must(s.RecordPingMarkingDue(ctx, p, urls, t0, note))(t)
	if p.ID == 0 {
		t.Fatal("RecordPingMarkingDue did not set the ID")
	}
	if !slices.Equal(marked, []int64{moved.ID, other.ID}) {
		t.Fatalf("marked %v, want [%d %d]", marked, moved.ID, other.ID)
	}
	got := must(s.Source(ctx, moved.ID))(t)
	if !got.NextFetchAt.Equal(t0) || !got.LastPingAt.Equal(t0) || got.PendingNote == nil || *got.PendingNote != *note {
		t.Fatalf("matched source: next %v ping %v note %v", got.NextFetchAt, got.LastPingAt, got.PendingNote)
	}
	got = must(s.Source(ctx, other.ID))(t)
	if !got.NextFetchAt.Equal(t0.Add(-time.Hour)) || !got.LastPingAt.Equal(t0) {
		t.Fatalf("source due sooner: next %v ping %v, want the sooner due time kept", got.NextFetchAt, got.LastPingAt)
	}
	got = must(s.Source(ctx, gone.ID))(t)
	if !got.NextFetchAt.IsZero() || !got.LastPingAt.IsZero() {
		t.Fatalf("gone source was marked: next %v ping %v", got.NextFetchAt, got.LastPingAt)
	}
	pings, total := must2(s.Pings(ctx, time.Time{}, 0))(t)
	if total != before+1 || len(pings) != 1 || pings[0].ID != p.ID || pings[0].FeedURL != "https://a.example/feed" {
		t.Fatalf("pings after: total %d (before %d), %+v", total, before, pings)
	}

	// Nothing followed: the ping is stored all the same.
	p = &hub.Ping{Dialect: "rest", URL: "https://nobody.example/"}
	if marked := must(s.RecordPingMarkingDue(ctx, p, []string{p.URL}, t0, nil))(t); len(marked) != 0 || p.ID == 0 {
		t.Fatalf("ping of nothing followed: marked %v, id %d", marked, p.ID)
	}
	if _, total = must2(s.Pings(ctx, time.Time{}, 0))(t); total != before+2 {
		t.Fatalf("total %d after two pings, want %d", total, before+2)
	}
}

// testRecordPingsMarkingDue: a batch of pings is stored in one call, each
// with its ID, the sources each names marked, and the counter grown by
// the batch.
func testRecordPingsMarkingDue(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	a, _ := newSource(t, s, "https://a.example/feed", "a")
	b, _ := newSource(t, s, "https://b.example/feed", "b")
	_, before := must2(s.Pings(ctx, time.Time{}, 1))(t)
	batch := []hub.PingToRecord{
		{Ping: &hub.Ping{Dialect: "xmlrpc", URL: "https://a.example/feed", ReceivedAt: t0}, URLs: []string{"https://a.example/feed"}},
		{Ping: &hub.Ping{Dialect: "rest", URL: "https://nobody.example/", ReceivedAt: t0}, URLs: []string{"https://nobody.example/"}},
		{Ping: &hub.Ping{Dialect: "xmlrpc", URL: "https://b.example/feed", ReceivedAt: t0}, URLs: []string{"https://b.example/feed", "https://a.example/feed"},
			Note: &hub.ChangeNote{Title: "T"}},
	}
	marked := must(s.RecordPingsMarkingDue(ctx, batch, t0))(t)
	if len(marked) != 3 || !slices.Equal(marked[0], []int64{a.ID}) || len(marked[1]) != 0 ||
		!slices.Equal(marked[2], []int64{min(a.ID, b.ID), max(a.ID, b.ID)}) {
		t.Fatalf("marked %v; sources a %d, b %d", marked, a.ID, b.ID)
	}
	for i, r := range batch {
		if r.Ping.ID == 0 {
			t.Fatalf("ping %d has no ID", i)
		}
	}
	if got := must(s.Source(ctx, b.ID))(t); !got.NextFetchAt.Equal(t0) || got.PendingNote == nil || got.PendingNote.Title != "T" {
		t.Fatalf("source b: next %v note %v", got.NextFetchAt, got.PendingNote)
	}
	pings, total := must2(s.Pings(ctx, time.Time{}, 0))(t)
	if total != before+3 || len(pings) != 3 {
		t.Fatalf("total %d (before %d), %d pings listed", total, before, len(pings))
	}
}
