package delivery_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// The dialect tests run the real engine on a real SQLite store with real
// loopback receivers; only the clock is fake, so that a day of ageing
// takes milliseconds.

// dialectEnv is a hub and a running delivery engine.
type dialectEnv struct {
	t      *testing.T
	ctx    context.Context
	store  store.Store
	hub    *hub.Hub
	engine *delivery.Engine
	clock  *testenv.Clock
	sender delivery.HTTPSender
}

// newDialectEnv starts an engine with the senders that senders builds from
// the shared HTTPSender (client, public URL, user agent).
func newDialectEnv(t *testing.T, senders func(delivery.HTTPSender, delivery.SourceReader, func() time.Time) map[hub.Kind]delivery.Sender) *dialectEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "pingd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &dialectEnv{t: t, ctx: ctx, store: st, clock: testenv.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	e.hub, err = hub.New(hub.Config{Stores: store.HubStores(st), Logger: log, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	e.sender = delivery.HTTPSender{Client: &http.Client{Timeout: 10 * time.Second}, PublicURL: "http://pingd.test", UserAgent: "pingd-test"}
	e.engine, err = delivery.New(delivery.Config{
		Store:        st,
		Senders:      senders(e.sender, st, e.clock.Now),
		Logger:       log,
		Now:          e.clock.Now,
		PollInterval: 10 * time.Millisecond,
		MinBackoff:   30 * time.Second,
		MaxBackoff:   time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.hub.Register(e.engine, e.engine.Kinds()...)
	done := make(chan struct{})
	go func() { defer close(done); _ = e.engine.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = st.Close()
	})
	return e
}

// testWriter sends log lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// node creates an owner node (no source) to publish to.
func (e *dialectEnv) node(name string) *hub.Node {
	e.t.Helper()
	n, _, err := e.hub.CreateNode(e.ctx, hub.NodeSpec{Name: name, Config: hub.DefaultNodeConfig()})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// publish appends an item to the node's log and wakes the engine.
func (e *dialectEnv) publish(node, id, title, summary string) {
	e.t.Helper()
	e.publishAll(node, testEntry(id, title, summary))
}

// publishAll appends the entries in one batch.
func (e *dialectEnv) publishAll(node string, entries ...hub.Entry) {
	e.t.Helper()
	if _, err := e.hub.Publish(e.ctx, node, "owner@example.org", entries); err != nil {
		e.t.Fatal(err)
	}
}

func testEntry(id, title, summary string) hub.Entry {
	payload := `<entry xmlns="http://www.w3.org/2005/Atom"><id>` + id + `</id><title>` + title +
		`</title><link href="http://example.org/` + id + `"/><updated>2030-01-01T00:00:00Z</updated></entry>`
	return hub.Entry{ID: id, Title: title, Summary: summary, Link: "http://example.org/" + id, Payload: []byte(payload)}
}

// subscribe stores a subscription as a handler would: a pending one as a
// request its subscriber verifies (a renewal of a verified one is its
// pending change), an active one (CNWS) as it is.
func (e *dialectEnv) subscribe(s hub.Subscription) *hub.Subscription {
	e.t.Helper()
	var sub *hub.Subscription
	var err error
	if s.State == hub.SubPending {
		sub, _, err = e.hub.RequestSubscription(e.ctx, s)
	} else {
		sub, _, err = e.hub.Subscribe(e.ctx, s)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return sub
}

// sub reads a subscription again; nil once it is gone.
func (e *dialectEnv) sub(id int64) *hub.Subscription {
	e.t.Helper()
	s, err := e.store.Subscription(e.ctx, id)
	if err != nil {
		return nil
	}
	return s
}

// waitSub waits until ok holds for the subscription (nil: removed).
func (e *dialectEnv) waitSub(id int64, what string, ok func(*hub.Subscription) bool) *hub.Subscription {
	e.t.Helper()
	var s *hub.Subscription
	testenv.WaitFor(e.t, 10*time.Second, fmt.Sprintf("subscription %d: %s", id, what), func() bool {
		s = e.sub(id)
		return ok(s)
	})
	return s
}

// advance moves the clock and wakes the engine so it looks for due work.
func (e *dialectEnv) advance(d time.Duration) {
	e.clock.Advance(d)
	e.engine.Wake(0)
}

// hit is one request a receiver got.
type hit struct {
	Method string
	Path   string
	Query  map[string][]string
	Header http.Header
	Body   string
	// At is the fake clock's time when it came.
	At time.Time
}

// receiver is a loopback HTTP server that records what it gets and answers
// with its current handler.
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	hits    []hit
	answer  func(w http.ResponseWriter, h hit)
	clock   *testenv.Clock
	arrived chan struct{}
}

func newReceiver(t *testing.T, clock *testenv.Clock, answer func(w http.ResponseWriter, h hit)) *receiver {
	rc := &receiver{answer: answer, clock: clock, arrived: make(chan struct{}, 1000)}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

// newReceiverOn starts a receiver on a given loopback address (a host that
// comes back).
func newReceiverOn(t *testing.T, addr string, clock *testenv.Clock, answer func(w http.ResponseWriter, h hit)) *receiver {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{answer: answer, clock: clock, arrived: make(chan struct{}, 1000)}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	rc.Listener.Close()
	rc.Listener = l
	rc.Start()
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	h := hit{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone(), Body: string(body)}
	rc.mu.Lock()
	if rc.clock != nil {
		h.At = rc.clock.Now()
	}
	rc.hits = append(rc.hits, h)
	answer := rc.answer
	rc.mu.Unlock()
	if answer != nil {
		answer(w, h)
	}
	rc.arrived <- struct{}{}
}

func (rc *receiver) setClock(c *testenv.Clock) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.clock = c
}

func (rc *receiver) setAnswer(f func(w http.ResponseWriter, h hit)) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.answer = f
}

func (rc *receiver) Hits() []hit {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hit(nil), rc.hits...)
}

// waitHits waits until the receiver got at least n requests.
func (rc *receiver) waitHits(t *testing.T, n int) []hit {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if hits := rc.Hits(); len(hits) >= n {
			return hits
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d requests; got %d: %+v", n, len(rc.Hits()), rc.Hits())
		}
		select {
		case <-rc.arrived:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// quiet checks that rc got exactly n requests, and no more once the
// engine has looked for work again and sent what it found.
func (e *dialectEnv) quiet(rc *receiver, n int) {
	e.t.Helper()
	e.engine.Settle(e.t)
	if hits := rc.Hits(); len(hits) != n {
		e.t.Fatalf("want exactly %d requests, got %d: %+v", n, len(hits), hits)
	}
}

func answerStatus(code int, body string) func(http.ResponseWriter, hit) {
	return func(w http.ResponseWriter, _ hit) {
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}
