package hub_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// pingCallsStore records the store calls of the ping path.
type pingCallsStore struct {
	store.Store
	mu    sync.Mutex
	calls []string
}

func (s *pingCallsStore) called(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, name)
}

func (s *pingCallsStore) RecordPingMarkingDue(ctx context.Context, p *hub.Ping, urls []string, at time.Time, note *hub.ChangeNote) ([]int64, error) {
	s.called("RecordPingMarkingDue")
	return s.Store.RecordPingMarkingDue(ctx, p, urls, at, note)
}

func (s *pingCallsStore) SourcesMatching(ctx context.Context, url string) ([]hub.Source, error) {
	s.called("SourcesMatching")
	return s.Store.SourcesMatching(ctx, url)
}

func (s *pingCallsStore) MarkSourceDue(ctx context.Context, id int64, at time.Time, note *hub.ChangeNote) error {
	s.called("MarkSourceDue")
	return s.Store.MarkSourceDue(ctx, id, at, note)
}

// TestPingIsOneStoreCall: a ping, whatever it names, is one store call
// (one transaction): the publisher waits for it, and on SQLite a look-up
// of its own on the read pool cost a quarter of the ping's time. The
// sources it names are marked due all the same, each counted once.
func TestPingIsOneStoreCall(t *testing.T) {
	ctx := t.Context()
	st := &pingCallsStore{Store: openStore(t)}
	clock := testenv.NewClock(t0)
	h, err := hub.New(hub.Config{
		Stores: store.HubStores(st), Fetcher: feed.NewFetcher(feed.FetcherConfig{Version: "test", PublicURL: "http://pingd.test", Now: clock.Now}),
		Now: clock.Now, Instance: "test", Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	src, _, err := st.EnsureSource(ctx, "http://blog.example/feed")
	if err != nil {
		t.Fatal(err)
	}
	for _, urls := range [][]string{
		{"http://nobody.example/"},
		{"http://blog.example/feed", "http://nobody.example/", "http://blog.example/feed"},
	} {
		st.calls = nil
		n, err := h.Ping(ctx, hub.Ping{Dialect: "xmlrpc-extended", Name: "Blog"}, urls, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := min(1, len(urls)-1); n != want {
			t.Errorf("ping of %v: %d sources, want %d", urls, n, want)
		}
		if !slices.Equal(st.calls, []string{"RecordPingMarkingDue"}) {
			t.Errorf("ping of %v: store calls %v, want one RecordPingMarkingDue", urls, st.calls)
		}
	}
	got, err := st.Source(ctx, src.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.NextFetchAt.Equal(t0) || !got.LastPingAt.Equal(t0) {
		t.Errorf("pinged source: due %v, last ping %v; want both %v", got.NextFetchAt, got.LastPingAt, t0)
	}
	if _, total, _ := h.Pings(ctx, time.Time{}, 0); total != 2 {
		t.Errorf("%d pings recorded, want 2", total)
	}
}
