package fetching_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/hub/fetching"
)

// TestLoopWakesAtNextDueTime: having claimed all that was due, the loop
// sleeps until the next source falls due, not until its one-second tick:
// each source's fetch starts at its due time to the instant (the bubble's
// clock), neither before nor on the next tick after it.
func TestLoopWakesAtNextDueTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now().UTC()
		due := map[int64]time.Duration{1: 300 * time.Millisecond, 2: 2500 * time.Millisecond, 3: 2500*time.Millisecond + 7*time.Microsecond}
		st := newDueStore()
		for id, d := range due {
			st.add(hub.Source{ID: id, SourceState: hub.SourceState{URL: "http://a" + string(rune('0'+id)) + ".example/feed", NextFetchAt: start.Add(d)}})
		}
		f := &recordingFetcher{at: map[string]time.Time{}}
		_, stop := runEngine(t, st, f)
		time.Sleep(4 * time.Second)
		synctest.Wait()
		stop()
		for id, d := range due {
			url := st.sources[id].URL
			got, ok := f.fetchedAt(url)
			if !ok {
				t.Errorf("source %d (due after %v) not fetched", id, d)
				continue
			}
			if want := start.Add(d).Truncate(time.Microsecond); !got.Equal(want) {
				t.Errorf("source %d fetched %v after the start, want %v (its due time)", id, got.Sub(start), d)
			}
		}
	})
}

// TestLoopClaimsAgainAfterAWakeDuringAClaim: a claim runs beside the
// loop; a Wake that comes while it runs (a ping making a source due after
// the claim's query) is not lost when the claim finds nothing: the loop
// claims again at once instead of on its next tick.
func TestLoopClaimsAgainAfterAWakeDuringAClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now().UTC()
		st := newDueStore()
		gate, inClaim := make(chan struct{}), make(chan struct{})
		first := true
		st.afterClaimQuery = func() {
			if first {
				first = false
				close(inClaim)
				<-gate
			}
		}
		f := &recordingFetcher{at: map[string]time.Time{}}
		e, stop := runEngine(t, st, f)
		<-inClaim
		// The claim has read nothing due; a ping makes a source due and
		// wakes the loop before the claim reports.
		st.mu.Lock()
		st.add(hub.Source{ID: 1, SourceState: hub.SourceState{URL: "http://a.example/feed", NextFetchAt: start}})
		st.mu.Unlock()
		e.Wake()
		synctest.Wait()
		close(gate)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		stop()
		got, ok := f.fetchedAt("http://a.example/feed")
		if !ok || !got.Equal(start) {
			t.Fatalf("source fetched %v after the start (fetched: %v), want at once", got.Sub(start), ok)
		}
	})
}

// TestLoneUnchangedOutcomeStoredAtOnce: an unchanged outcome waits for
// company only while other fetches run that could join its batch; when
// the last fetch has ended, it is stored at once (the lease released),
// not after the writer's batching delay.
func TestLoneUnchangedOutcomeStoredAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now().UTC()
		st := newDueStore()
		st.add(hub.Source{ID: 1, SourceState: hub.SourceState{URL: "http://a.example/feed", NextFetchAt: start}})
		f := &recordingFetcher{at: map[string]time.Time{}}
		_, stop := runEngine(t, st, f)
		time.Sleep(time.Second)
		synctest.Wait()
		stop()
		st.mu.Lock()
		defer st.mu.Unlock()
		if len(st.unchangedAt) == 0 {
			t.Fatal("the unchanged outcome was not stored")
		}
		if got := st.unchangedAt[0].Sub(start); got != 0 {
			t.Errorf("the unchanged outcome was stored %v after its fetch ended, want at once", got)
		}
	})
}

// recordingFetcher answers 304 to everything and records when each URL
// was first fetched.
type recordingFetcher struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (f *recordingFetcher) Fetch(_ context.Context, req hub.FetchRequest) (*hub.FetchResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.at[req.URL]; !ok {
		f.at[req.URL] = time.Now().UTC()
	}
	return &hub.FetchResult{Status: 304, NotModified: true, FinalURL: req.URL}, nil
}

func (f *recordingFetcher) fetchedAt(url string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	at, ok := f.at[url]
	return at, ok
}

// dueStore is an in-memory fetching.Store of followed sources, its times
// kept to the microsecond as the SQL stores keep them.
type dueStore struct {
	mu      sync.Mutex
	sources map[int64]*hub.Source
	// afterClaimQuery, if set, runs in each claim after it has picked
	// its sources, before it returns them (on the claim's goroutine).
	afterClaimQuery func()
	// unchangedAt: when each ApplyUnchangedFetches came.
	unchangedAt []time.Time
}

func newDueStore() *dueStore { return &dueStore{sources: map[int64]*hub.Source{}} }

func (s *dueStore) add(src hub.Source) {
	src.NextFetchAt = src.NextFetchAt.Truncate(time.Microsecond)
	s.sources[src.ID] = &src
}

func (s *dueStore) Source(_ context.Context, id int64) (*hub.Source, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	src, ok := s.sources[id]
	if !ok {
		return nil, hub.ErrNotFound
	}
	c := *src
	return &c, nil
}

func (s *dueStore) SourceBody(context.Context, int64) ([]byte, error) { return nil, nil }

func (s *dueStore) ClaimDueSources(_ context.Context, now time.Time, limit int, owner string, until time.Time) ([]hub.Source, error) {
	s.mu.Lock()
	now = now.Truncate(time.Microsecond)
	var out []hub.Source
	for _, src := range s.sources {
		if len(out) == limit {
			break
		}
		if src.Gone || src.NextFetchAt.IsZero() || src.NextFetchAt.After(now) || src.LeaseUntil.After(now) {
			continue
		}
		src.LeaseOwner, src.LeaseUntil = owner, until
		out = append(out, *src)
	}
	s.mu.Unlock()
	if s.afterClaimQuery != nil {
		s.afterClaimQuery()
	}
	return out, nil
}

func (s *dueStore) apply(o hub.FetchOutcome) {
	src, ok := s.sources[o.SourceID]
	if !ok || src.LeaseOwner != o.Owner {
		return
	}
	url := src.URL
	src.SourceState = o.State
	src.URL = url
	src.NextFetchAt = src.NextFetchAt.Truncate(time.Microsecond)
	src.LeaseOwner, src.LeaseUntil = "", time.Time{}
}

func (s *dueStore) ApplyFetch(_ context.Context, o hub.FetchOutcome) (hub.FetchApplied, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apply(o)
	return hub.FetchApplied{}, nil
}

func (s *dueStore) ApplyUnchangedFetches(_ context.Context, outs []hub.FetchOutcome) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unchangedAt = append(s.unchangedAt, time.Now().UTC())
	for _, o := range outs {
		s.apply(o)
	}
	return nil
}

func (s *dueStore) SourcesLeasedByOthers(context.Context, string, time.Time) ([]hub.Source, error) {
	return nil, nil
}

func (s *dueStore) SourcesLeasedBy(context.Context, string) ([]hub.Source, error) { return nil, nil }

func (s *dueStore) NextSourceDue(_ context.Context, now time.Time) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now = now.Truncate(time.Microsecond)
	var next time.Time
	for _, src := range s.sources {
		if !src.Gone && src.NextFetchAt.After(now) && (next.IsZero() || src.NextFetchAt.Before(next)) {
			next = src.NextFetchAt
		}
	}
	return next, nil
}

// runEngine runs a fetch engine on st and f until stop, which waits for
// it to end.
func runEngine(t *testing.T, st fetching.Store, f hub.Fetcher) (e *fetching.Engine, stop func()) {
	t.Helper()
	e, err := fetching.New(fetching.Config{Store: st, Fetcher: f, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		e.Run(ctx, nil)
	}()
	return e, func() {
		cancel()
		<-ran
	}
}
