package httpapi

import (
	"compress/gzip"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// listCountingStore counts the ping list queries that reach the store.
type listCountingStore struct {
	store.Store
	listQueries atomic.Int64
}

func (s *listCountingStore) Pings(ctx context.Context, since time.Time, limit int) ([]hub.Ping, int64, error) {
	s.listQueries.Add(1)
	return s.Store.Pings(ctx, since, limit)
}

func (s *listCountingStore) PingsBetween(ctx context.Context, since, until time.Time, limit int) ([]hub.Ping, int64, error) {
	s.listQueries.Add(1)
	return s.Store.PingsBetween(ctx, since, until, limit)
}

// newListEnv starts the API on a counting store holding n pings, one a
// second back from now, each with a name and a URL padded by pad bytes;
// every other one is an extendedPing with a feed URL padded too.
func newListEnv(t *testing.T, n, pad int, tune ...func(*Config)) (*env, *listCountingStore) {
	t.Helper()
	var counter *listCountingStore
	e := newEnvOn(t, func(s store.Store) store.Store {
		counter = &listCountingStore{Store: s}
		return counter
	}, tune...)
	now := e.clock.Now()
	long := strings.Repeat("x", pad)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8) // concurrent writers share commits
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			p := &hub.Ping{
				Dialect:    DialectWeblogUpdates,
				Name:       fmt.Sprintf("Blog %d %s", i, long),
				URL:        fmt.Sprintf("http://blog%d.example/%s", i, long),
				ReceivedAt: now.Add(-time.Duration(i) * time.Second),
				Tags:       []string{"t" + strconv.Itoa(i%2)},
			}
			if i%2 == 0 {
				p.Dialect, p.FeedURL = DialectExtendedPing, fmt.Sprintf("http://blog%d.example/feed/%s", i, long)
			}
			if err := counter.Store.RecordPing(t.Context(), p); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return e, counter
}

// listBytes reads a 200 answer's document, gunzipped, and checks its size
// against the cap.
func listBytes(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	var r io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Error(err)
			return nil
		}
		r = zr
	}
	body, err := io.ReadAll(r)
	if err != nil {
		t.Error(err)
		return nil
	}
	if len(body) > listMaxBytes {
		t.Errorf("%s: a document of %d bytes, beyond the cap of %d", resp.Request.URL.Path, len(body), listMaxBytes)
	}
	return body
}

// listBody is listBytes parsed, with the entries checked against their cap.
func listBody(t *testing.T, resp *http.Response) *weblogUpdates {
	t.Helper()
	body := listBytes(t, resp)
	if body == nil {
		return nil
	}
	var doc weblogUpdates
	if err := xml.Unmarshal(body, &doc); err != nil {
		t.Errorf("%s: %v", resp.Request.URL.Path, err)
		return nil
	}
	if len(doc.Weblogs) > listMaxEntries {
		t.Errorf("%s: %d entries, beyond the cap of %d", resp.Request.URL.Path, len(doc.Weblogs), listMaxEntries)
	}
	return &doc
}

// TestChangesUnderLoad: many readers of /changes.xml at once, with more
// pings stored than a list shows, cost one store query per list per
// interval; every answer is 200, 304 or 429 and within the caps; /healthz
// stays 200 meanwhile.
func TestChangesUnderLoad(t *testing.T) {
	const pings, readers = listMaxEntries + 100, 120
	load := func(t *testing.T, e *env, path string) map[int]int {
		t.Helper()
		stop := make(chan struct{})
		var health sync.WaitGroup
		health.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := e.srv.Client().Get(e.srv.URL + "/healthz")
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("/healthz under list load: %d", resp.StatusCode)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
		var (
			mu       sync.Mutex
			statuses = map[int]int{}
			wg       sync.WaitGroup
		)
		for i := range readers {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
				if i%2 == 0 {
					req.Header.Set("Accept-Encoding", "gzip")
				} else {
					req.Header.Set("Accept-Encoding", "identity")
				}
				resp, err := e.srv.Client().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					listBytes(t, resp)
				case http.StatusNotModified:
				case http.StatusTooManyRequests:
					if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || secs < 1 {
						t.Errorf("429 with Retry-After %q", resp.Header.Get("Retry-After"))
					}
				default:
					t.Errorf("GET %s under load: %d", path, resp.StatusCode)
				}
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
			})
		}
		wg.Wait()
		close(stop)
		health.Wait()
		return statuses
	}

	t.Run("cached", func(t *testing.T) {
		e, st := newListEnv(t, pings, 0, func(c *Config) { c.ListRate, c.ListBurst = 1e6, 1e6 })
		statuses := load(t, e, "/changes.xml")
		resp := e.do(http.MethodGet, "/changes.xml", "", nil)
		wantStatus(t, resp, http.StatusOK)
		if doc := listBody(t, resp); doc == nil || len(doc.Weblogs) != listMaxEntries || doc.Count != strconv.Itoa(pings) {
			t.Errorf("changes.xml does not list the newest %d pings and count all %d", listMaxEntries, pings)
		}
		if statuses[http.StatusOK] != readers {
			t.Errorf("answers %v, want %d × 200", statuses, readers)
		}
		if n := st.listQueries.Load(); n != 1 {
			t.Errorf("%d list queries for %d readers within one interval, want 1", n, readers)
		}
		// shortChanges.xml is a view of the same reading.
		resp = e.do(http.MethodGet, "/shortChanges.xml", "", nil)
		wantStatus(t, resp, http.StatusOK)
		if doc := listBody(t, resp); doc == nil || len(doc.Weblogs) != 301 {
			t.Error("shortChanges.xml does not list the 301 pings of the last five minutes")
		}
		if n := st.listQueries.Load(); n != 1 {
			t.Errorf("shortChanges.xml read the store again (%d queries)", n)
		}
		// A tag filters the kept reading.
		resp = e.do(http.MethodGet, "/changes.xml?tag=T1", "", nil)
		wantStatus(t, resp, http.StatusOK)
		if doc := listBody(t, resp); doc == nil || len(doc.Weblogs) == 0 || doc.Count != strconv.Itoa(len(doc.Weblogs)) {
			t.Error("changes.xml?tag=T1 lists nothing, or counts what it does not list")
		}
		if n := st.listQueries.Load(); n != 1 {
			t.Errorf("a tag read the store again (%d queries)", n)
		}
		// The next interval reads it once more.
		e.clock.Advance(listInterval)
		load(t, e, "/changes.xml")
		if n := st.listQueries.Load(); n != 2 {
			t.Errorf("%d list queries over two intervals, want 2", n)
		}
		// An hour's archive is read once per interval too.
		hour := archivePath(e.clock.Now().Add(-10 * time.Minute).Truncate(time.Hour))
		for range 3 {
			wantStatus(t, e.do(http.MethodGet, hour, "", nil), http.StatusOK)
		}
		if n := st.listQueries.Load(); n != 3 {
			t.Errorf("%d list queries after three readers of an archive, want 3", n)
		}
	})

	t.Run("limited", func(t *testing.T) {
		e, st := newListEnv(t, 50, 0)
		statuses := load(t, e, "/changes.xml")
		served := statuses[http.StatusOK] + statuses[http.StatusNotModified]
		if statuses[http.StatusTooManyRequests] == 0 || served == 0 || served > DefaultListBurst+5 {
			t.Errorf("answers %v from one client, want at most about %d served and the rest 429", statuses, DefaultListBurst)
		}
		if n := st.listQueries.Load(); n != 1 {
			t.Errorf("%d list queries, want 1", n)
		}
	})
}

// TestListHeadersAndCaps: the lists and archives carry nosniff, an ETag,
// a Cache-Control as long as their reading serves, and gzip; with names
// and URLs of 1 KB a document keeps the newest pings within the byte cap,
// and "count" still counts them all.
func TestListHeadersAndCaps(t *testing.T) {
	e, _ := newListEnv(t, 1100, 1000)
	hour := archivePath(e.clock.Now().Add(-2 * time.Hour).Truncate(time.Hour))
	for _, path := range []string{"/changes.xml", "/shortChanges.xml", hour} {
		resp := e.do(http.MethodGet, path, "", nil, "Accept-Encoding", "gzip")
		wantStatus(t, resp, http.StatusOK)
		h := resp.Header
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("ETag") == "" ||
			h.Get("Content-Encoding") != "gzip" || !strings.HasPrefix(h.Get("Cache-Control"), "public, max-age=") {
			t.Errorf("%s: headers %v", path, h)
		}
		listBody(t, resp)
		resp = e.do(http.MethodGet, path, "", nil, "Accept-Encoding", "gzip", "If-None-Match", h.Get("ETag"))
		wantStatus(t, resp, http.StatusNotModified)
	}
	resp := e.do(http.MethodGet, "/changes.xml", "", nil)
	doc := listBody(t, resp)
	if doc == nil || len(doc.Weblogs) == 0 || doc.Count != "1100" {
		t.Fatal("changes.xml lists nothing, or does not count every ping")
	}
	if len(doc.Weblogs) == 1100 {
		t.Error("every ping of 2 KB is listed: the byte cap did not bind")
	}
	if !strings.HasPrefix(doc.Weblogs[0].Name, "Blog 0 ") || doc.Weblogs[0].When != "0" {
		t.Errorf("the first entry is %q (when %s), want the newest ping", doc.Weblogs[0].Name[:10], doc.Weblogs[0].When)
	}
	// Within the interval the answer stays as read, and says for how long.
	e.clock.Advance(4 * time.Second)
	resp = e.do(http.MethodGet, "/changes.xml", "", nil)
	wantStatus(t, resp, http.StatusOK)
	if cc := resp.Header.Get("Cache-Control"); cc != "public, max-age="+strconv.Itoa(int((listInterval-4*time.Second)/time.Second)) {
		t.Errorf("Cache-Control %q 4 s into the interval", cc)
	}
}
