package discovery

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/weblogs"
	"github.com/pingd/pingd/store"
)

// TestPagePingsCloseJoinsLookups: a page look-up in flight when its owner
// shuts down ends and is joined by Close, before the store closes; the
// page answering afterwards makes nothing touch the closed store, and a
// ping recorded after Close starts no look-up.
func TestPagePingsCloseJoinsLookups(t *testing.T) {
	ctx := context.Background()
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "pingd.db"), store.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	var closeStore sync.Once
	defer closeStore.Do(func() { st.Close() })
	h, err := hub.New(hub.Config{Stores: store.HubStores(st), Logger: log})
	if err != nil {
		t.Fatal(err)
	}

	arrived, release := make(chan struct{}, 8), make(chan struct{})
	var served sync.WaitGroup
	var requests sync.Mutex
	hits := 0
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		defer served.Done()
		requests.Lock()
		hits++
		requests.Unlock()
		arrived <- struct{}{}
		<-release // answers only after its owner has shut down
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<html><head><link rel="alternate" type="application/rss+xml" href="/feed.xml"></head></html>`))
	}))
	defer page.Close()

	// base never ends: only Close may end the look-up.
	pp := NewPagePings(context.Background(), h, testClient(), log)
	ping := func(u string) {
		pp.PingRecorded(ctx, hub.PingRecord{Ping: hub.Ping{Dialect: weblogs.DialectREST, URL: u}, URLs: []string{u}})
	}
	ping(page.URL + "/blog/")
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the page was never asked for")
	}

	closed := make(chan struct{})
	go func() {
		pp.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the look-up in flight")
	}
	// Every place is free again: Close ended the look-up.
	if lk, err := pp.lookups.Begin(ctx, "127.0.0.1", false); err != nil {
		t.Fatalf("a look-up still holds its place after Close: %v", err)
	} else {
		lk.End()
	}
	closeStore.Do(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	ping(page.URL + "/other/")
	close(release)
	served.Wait()
	// running joins every look-up and what it sets off (Close waits on
	// it): one still running, or one the late ping started, has acted
	// once this returns.
	pp.running.Wait()
	requests.Lock()
	defer requests.Unlock()
	if hits != 1 {
		t.Errorf("the page server was asked %d times; a ping after Close started a look-up", hits)
	}
	if out := logs.String(); strings.Contains(out, "pinged page") || strings.Contains(out, "closed") {
		t.Errorf("the look-up went on after Close:\n%s", out)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
