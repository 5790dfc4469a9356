package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mmcdole/gofeed"

	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/getpingd"
	"github.com/pingd/pingd/internal/netguard"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// The tests run the engine on a real SQLite store with real loopback
// receivers; only the clock is the test's, so retry schedules are exact.

const (
	testPublicURL  = "http://pingd.test:8080"
	testDescriptor = testPublicURL + "/feeds/news"
	testHub        = testPublicURL + "/websub"
)

type harness struct {
	t      *testing.T
	store  store.Store
	hub    *hub.Hub
	engine *Engine
	clock  *testenv.Clock
	node   *hub.Node
}

// newHarness starts a hub and a delivery engine with the webhook sender
// on a fresh SQLite file, and creates the node "news".
func newHarness(t *testing.T, tune ...func(*Config)) *harness {
	t.Helper()
	ctx := context.Background()
	st := openTestStore(t)
	clock := testenv.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	h, err := hub.New(hub.Config{Stores: store.HubStores(st), Now: clock.Now, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Store: st,
		Senders: map[hub.Kind]Sender{hub.KindWebhook: &Webhook{HTTPSender: HTTPSender{
			Client:    netguard.NewClient(netguard.Options{AllowPrivate: true}),
			PublicURL: testPublicURL,
			UserAgent: "pingd/test",
		}}},
		Logger:       quietLogger(),
		Now:          clock.Now,
		PollInterval: 10 * time.Millisecond,
	}
	for _, f := range tune {
		f(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.rand = func() float64 { return 0.5 } // no jitter: exact schedules
	h.Register(e, e.Kinds()...)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = e.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	cfgNode := hub.DefaultNodeConfig()
	cfgNode.Title = "News"
	n, _, err := h.CreateNode(ctx, hub.NodeSpec{Name: "news", Config: cfgNode})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, store: st, hub: h, engine: e, clock: clock, node: n}
}

// openTestStore opens a store on a fresh SQLite file, closed after the test.
func openTestStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "pingd.db"), store.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))
}

// subscribe adds a webhook subscription in the given state.
func (h *harness) subscribe(address string, state hub.SubState, opts hub.Options) int64 {
	h.t.Helper()
	s, _, err := h.hub.Subscribe(context.Background(), hub.Subscription{
		NodeName: "news", Kind: hub.KindWebhook, Address: address, State: state, Options: opts,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return s.ID
}

// sub returns the subscription, or nil once it is gone.
func (h *harness) sub(id int64) *hub.Subscription {
	h.t.Helper()
	s, err := h.store.Subscription(context.Background(), id)
	if errors.Is(err, hub.ErrNotFound) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// settled returns the subscription once no delivery holds it.
func (h *harness) settled(id int64) *hub.Subscription {
	h.t.Helper()
	var s *hub.Subscription
	testenv.WaitFor(h.t, 15*time.Second, "the subscription to be released", func() bool {
		s = h.sub(id)
		return s == nil || s.LeaseOwner == ""
	})
	return s
}

func (h *harness) publish(ids ...string) {
	h.t.Helper()
	entries := make([]hub.Entry, 0, len(ids))
	for _, id := range ids {
		entries = append(entries, hub.Entry{
			ID: id, Title: "Title " + id, Link: "https://example.org/" + id,
			Payload: []byte(`<entry xmlns="http://www.w3.org/2005/Atom"><id>` + id + `</id><title>Title ` + id +
				`</title><link href="https://example.org/` + id + `"/><updated>2026-01-02T03:04:05Z</updated></entry>`),
		})
	}
	if _, err := h.hub.Publish(context.Background(), "news", "owner@example.org", entries); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) lastSeq() int64 {
	h.t.Helper()
	n, err := h.hub.Node(context.Background(), "news")
	if err != nil {
		h.t.Fatal(err)
	}
	return n.LastSeq
}

// request is one request a receiver got.
type received struct {
	Method      string
	Path        string
	Query       url.Values
	ContentType string
	Signature   string
	Link        string
	UserAgent   string
	Body        []byte
	At          time.Time // the engine's clock when it arrived
}

// receiver is a webhook receiver on a fixed loopback address that can go
// down (connections refused) and come back.
type receiver struct {
	t     *testing.T
	clock *testenv.Clock
	addr  string

	mu     sync.Mutex
	srv    *http.Server
	got    []received
	checks []received
	echo   func(challenge string) (int, string) // answer to verification
	answer func(r *received) (int, string)      // answer to deliveries
}

func newReceiver(t *testing.T, clock *testenv.Clock) *receiver {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{t: t, clock: clock, addr: ln.Addr().String()}
	r.serve(ln)
	t.Cleanup(r.Down)
	return r
}

func (r *receiver) URL(path string) string { return "http://" + r.addr + path }

func (r *receiver) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(r.handle), ReadHeaderTimeout: 5 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// Down closes the listener and every connection.
func (r *receiver) Down() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Up listens again on the same address.
func (r *receiver) Up() {
	r.t.Helper()
	var ln net.Listener
	testenv.WaitFor(r.t, 2*time.Second, "the address "+r.addr+" free to listen on again", func() bool {
		var err error
		ln, err = net.Listen("tcp", r.addr)
		return err == nil
	})
	r.serve(ln)
}

func (r *receiver) handle(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	rec := received{
		Method: req.Method, Path: req.URL.Path, Query: req.URL.Query(),
		ContentType: req.Header.Get("Content-Type"), Signature: req.Header.Get("X-Hub-Signature"),
		Link: req.Header.Get("Link"), UserAgent: req.UserAgent(), Body: body, At: r.clock.Now(),
	}
	r.mu.Lock()
	echo, answer := r.echo, r.answer
	if req.Method == http.MethodGet {
		r.checks = append(r.checks, rec)
	} else {
		r.got = append(r.got, rec)
	}
	r.mu.Unlock()
	code, text := http.StatusNoContent, ""
	switch {
	case req.Method == http.MethodGet && echo != nil:
		code, text = echo(rec.Query.Get("hub.challenge"))
	case req.Method == http.MethodGet:
		code, text = http.StatusOK, rec.Query.Get("hub.challenge")
	case answer != nil:
		code, text = answer(&rec)
	}
	w.WriteHeader(code)
	_, _ = io.WriteString(w, text)
}

func (r *receiver) set(f func(r *receiver)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

// deliveries returns the deliveries (non-GET requests) to path so far.
func (r *receiver) deliveries(path string) []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []received
	for _, g := range r.got {
		if path == "" || g.Path == path {
			out = append(out, g)
		}
	}
	return out
}

func (r *receiver) verifications() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.checks)
}

// atomIDs parses a delivered Atom document and returns its entry ids.
func atomIDs(t *testing.T, body []byte) []string {
	t.Helper()
	f, err := gofeed.NewParser().Parse(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("delivered document does not parse: %v\n%s", err, body)
	}
	if f.FeedType != "atom" {
		t.Fatalf("delivered a %s document", f.FeedType)
	}
	ids := make([]string, 0, len(f.Items))
	for _, it := range f.Items {
		ids = append(ids, it.GUID)
	}
	return ids
}

func TestReceiverDownThenBackGetsEverythingInOrder(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Batch = 2 })
	rcv := newReceiver(t, h.clock)
	id := h.subscribe(rcv.URL("/hook"), hub.SubActive, hub.Options{Method: getpingd.WebhookMethodPost, Diff: getpingd.DiffNone})

	rcv.Down()
	var published []string
	for i, batch := range [][]string{{"1"}, {"2"}, {"3"}, {"4", "5"}} {
		h.publish(batch...)
		for _, id := range batch {
			published = append(published, feed.AtomID(id))
		}
		// Each publication finds the receiver down and is retried later.
		testenv.WaitFor(t, 15*time.Second, "a failed attempt", func() bool {
			s := h.sub(id)
			return s.ConsecutiveErrors == i+1 && s.LeaseOwner == ""
		})
		s := h.sub(id)
		if s.Cursor != 0 || s.NextAttemptAt.Before(h.clock.Now().Add(time.Second)) {
			t.Fatalf("after failure %d: cursor %d, next attempt %v (now %v)", i+1, s.Cursor, s.NextAttemptAt, h.clock.Now())
		}
		h.clock.Set(s.NextAttemptAt)
	}
	rcv.Up()
	h.engine.Wake(0)
	testenv.WaitFor(t, 15*time.Second, "the receiver to catch up", func() bool {
		s := h.sub(id)
		return s.Cursor == h.lastSeq() && s.LeaseOwner == ""
	})
	var got []string
	for _, d := range rcv.deliveries("/hook") {
		ids := atomIDs(t, d.Body)
		if len(ids) > 2 {
			t.Errorf("a delivery of %d entries with a batch of 2", len(ids))
		}
		slices.Reverse(ids) // each document lists the newest first
		got = append(got, ids...)
	}
	if !slices.Equal(got, published) {
		t.Errorf("received %v, want every item once, in order: %v", got, published)
	}
	if s := h.sub(id); s.ConsecutiveErrors != 0 || !s.NextAttemptAt.IsZero() || s.LastError != "" {
		t.Errorf("error state not cleared: %+v", s.DeliveryState)
	}
}

func TestReceiverAskingToBeRemoved(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   int
		body   string
		remove bool
	}{
		{"410", http.StatusGone, "", true},
		{"2xx false", http.StatusOK, "false", true},
		{"2xx FALSE with spaces", http.StatusAccepted, " FALSE\n", true},
		{"2xx true", http.StatusOK, "true", false},
		{"2xx empty", http.StatusNoContent, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			rcv := newReceiver(t, h.clock)
			rcv.set(func(r *receiver) { r.answer = func(*received) (int, string) { return tc.code, tc.body } })
			id := h.subscribe(rcv.URL("/hook"), hub.SubActive, hub.Options{})
			h.publish("a")
			testenv.WaitFor(t, 15*time.Second, "the delivery", func() bool { return len(rcv.deliveries("")) == 1 })
			s := h.settled(id)
			if removed := s == nil; removed != tc.remove {
				t.Fatalf("removed = %v, want %v", removed, tc.remove)
			}
			if s != nil && s.Cursor != h.lastSeq() {
				t.Errorf("cursor %d, want %d", s.Cursor, h.lastSeq())
			}
		})
	}
}

// TestRetriesBackOffUntilTheEndOfTheWindow checks the whole 24-hour
// schedule of a receiver that always fails: exponential backoff capped at
// MaxBackoff, one last retry exactly at the end of the window, removal.
func TestRetriesBackOffUntilTheEndOfTheWindow(t *testing.T) {
	h := newHarness(t)
	rcv := newReceiver(t, h.clock)
	rcv.set(func(r *receiver) {
		r.answer = func(*received) (int, string) { return http.StatusServiceUnavailable, "busy" }
	})
	id := h.subscribe(rcv.URL("/hook"), hub.SubActive, hub.Options{})

	start := h.clock.Now()
	var want []time.Time
	deadline := start.Add(24 * time.Hour)
	for at, k := start, 0; ; k++ {
		want = append(want, at)
		if at.Equal(deadline) {
			break
		}
		d := time.Hour
		if k < 20 {
			d = min(30*time.Second<<k, time.Hour)
		}
		if at = at.Add(d); at.After(deadline) {
			at = deadline
		}
	}

	h.publish("a")
	for attempt := 1; ; attempt++ {
		testenv.WaitFor(t, 15*time.Second, fmt.Sprintf("attempt %d", attempt), func() bool { return len(rcv.deliveries("")) >= attempt })
		s := h.settled(id)
		if s == nil {
			break
		}
		if s.ConsecutiveErrors != attempt || !s.FirstFailureAt.Equal(start) || s.LastStatus != http.StatusServiceUnavailable {
			t.Fatalf("after attempt %d: %+v", attempt, s.DeliveryState)
		}
		if attempt > len(want) {
			t.Fatalf("still retrying after %d attempts", attempt)
		}
		// Nothing happens before the next attempt is due.
		h.clock.Set(s.NextAttemptAt.Add(-time.Millisecond))
		h.engine.settle(t)
		if n := len(rcv.deliveries("")); n != attempt {
			t.Fatalf("attempt %d came early", n)
		}
		h.clock.Set(s.NextAttemptAt)
		h.engine.Wake(0)
	}
	var got []time.Time
	for _, d := range rcv.deliveries("") {
		got = append(got, d.At)
	}
	if !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("attempts at\n%v\nwant\n%v", offsets(got, start), offsets(want, start))
	}
}

func offsets(ts []time.Time, start time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(start)
	}
	return out
}

// TestSlowReceiverDoesNotHoldUpOthers: more subscriptions on a receiver
// that takes 10 s than there are workers must not delay a healthy one.
func TestSlowReceiverDoesNotHoldUpOthers(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Workers, c.PerHost = 4, 2 })
	slow := newReceiver(t, h.clock)
	healthy := newReceiver(t, h.clock)
	release := make(chan struct{})
	var mu sync.Mutex
	inFlight, maxInFlight, slowDone := 0, 0, 0
	slow.set(func(r *receiver) {
		r.answer = func(*received) (int, string) {
			mu.Lock()
			inFlight++
			maxInFlight = max(maxInFlight, inFlight)
			mu.Unlock()
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
			mu.Lock()
			inFlight--
			slowDone++
			mu.Unlock()
			return http.StatusNoContent, ""
		}
	})
	slowDoneWhenHealthyServed := -1
	healthy.set(func(r *receiver) {
		r.answer = func(*received) (int, string) {
			mu.Lock()
			slowDoneWhenHealthyServed = slowDone
			mu.Unlock()
			return http.StatusNoContent, ""
		}
	})
	var slowIDs []int64
	for i := range 8 {
		slowIDs = append(slowIDs, h.subscribe(slow.URL(fmt.Sprintf("/s%d", i)), hub.SubActive, hub.Options{}))
	}
	healthyID := h.subscribe(healthy.URL("/hook"), hub.SubActive, hub.Options{})
	h.publish("a")

	testenv.WaitFor(t, 15*time.Second, "the healthy receiver's delivery", func() bool { return len(healthy.deliveries("")) == 1 })
	mu.Lock()
	done := slowDoneWhenHealthyServed
	mu.Unlock()
	if done != 0 {
		t.Errorf("the healthy receiver was served only after %d slow deliveries finished", done)
	}
	if s := h.settled(healthyID); s.Cursor != h.lastSeq() {
		t.Errorf("healthy cursor %d", s.Cursor)
	}

	// The slow receiver gets everything too, never more than PerHost at once.
	close(release)
	testenv.WaitFor(t, 15*time.Second, "the slow receiver's deliveries", func() bool {
		h.clock.Advance(time.Second) // past any postponement
		h.engine.Wake(0)
		for _, id := range slowIDs {
			if s := h.sub(id); s.Cursor != h.lastSeq() || s.LeaseOwner != "" {
				return false
			}
		}
		return true
	})
	for i := range slowIDs {
		if n := len(slow.deliveries(fmt.Sprintf("/s%d", i))); n != 1 {
			t.Errorf("/s%d got %d deliveries", i, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if maxInFlight > 2 {
		t.Errorf("%d requests at once to one host, limit 2", maxInFlight)
	}
	if s := h.sub(slowIDs[0]); s.ConsecutiveErrors != 0 || s.Attempts != 1 {
		t.Errorf("postponing counted as attempts: %+v", s.DeliveryState)
	}
}

// TestManySubscribersOnOneHost: when more subscriptions of one receiver
// host are claimed than its slots and queue take, the ones put off are
// tried again when they are due, not only at the next poll (here an hour
// away): every subscriber gets the item without any poll.
func TestManySubscribersOnOneHost(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Now, c.PollInterval = time.Now, time.Hour
		c.Workers, c.PerHost = 8, 1 // a queue of 16: most of 60 are put off
	})
	rc := newReceiver(t, h.clock)
	const n = 60
	for i := range n {
		h.subscribe(rc.URL(fmt.Sprintf("/s%d", i)), hub.SubActive, hub.Options{})
	}
	h.publish("a")
	testenv.WaitFor(t, 15*time.Second, "every subscriber's delivery", func() bool { return len(rc.deliveries("")) >= n })
	paths := map[string]bool{}
	for _, d := range rc.deliveries("") {
		paths[d.Path] = true
	}
	if len(paths) != n {
		t.Errorf("%d distinct subscribers served, want %d", len(paths), n)
	}
}

// TestItemPublishedDuringDeliveriesFollows: an item published while the
// node's subscriptions are claimed (leased, their states not yet saved)
// is delivered once their states are saved, without waiting for the next
// poll (here an hour away).
func TestItemPublishedDuringDeliveriesFollows(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Now, c.PollInterval = time.Now, time.Hour
		c.Workers, c.PerHost = 4, 1 // one request at a time, the rest queued in memory
	})
	rc := newReceiver(t, h.clock)
	gate := make(chan struct{})
	rc.set(func(r *receiver) {
		r.answer = func(*received) (int, string) {
			<-gate
			return http.StatusNoContent, ""
		}
	})
	const n = 8
	var ids []int64
	for i := range n {
		ids = append(ids, h.subscribe(rc.URL(fmt.Sprintf("/s%d", i)), hub.SubActive, hub.Options{}))
	}
	h.publish("a")
	testenv.WaitFor(t, 15*time.Second, "the first request", func() bool { return len(rc.deliveries("")) >= 1 })
	h.publish("b") // every subscription is claimed now: this wake finds none
	close(gate)
	last := h.lastSeq()
	testenv.WaitFor(t, 15*time.Second, "every cursor at the second item", func() bool {
		for _, id := range ids {
			if s := h.sub(id); s.Cursor != last || s.LeaseOwner != "" {
				return false
			}
		}
		return true
	})
	for i := range n {
		var got []string
		for _, d := range rc.deliveries(fmt.Sprintf("/s%d", i)) {
			got = append(got, string(d.Body))
		}
		if all := strings.Join(got, ""); !strings.Contains(all, "<title>Title a</title>") || !strings.Contains(all, "<title>Title b</title>") {
			t.Errorf("/s%d got %d deliveries without both items: %s", i, len(got), all)
		}
	}
}

// TestLongBacklogNeedsNoPoll: a subscription more than a batch behind is
// served batch after batch, each looking at the node again once its state
// is saved, without waiting for the next poll (here an hour away).
func TestLongBacklogNeedsNoPoll(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Now, c.PollInterval, c.Batch = time.Now, time.Hour, 2 })
	rc := newReceiver(t, h.clock)
	id := h.subscribe(rc.URL("/hook"), hub.SubActive, hub.Options{})
	h.publish("1", "2", "3", "4", "5")
	testenv.WaitFor(t, 15*time.Second, "the whole backlog", func() bool {
		s := h.sub(id)
		return s.Cursor == h.lastSeq() && s.LeaseOwner == ""
	})
	if n := len(rc.deliveries("/hook")); n != 3 {
		t.Errorf("%d deliveries of 5 items in batches of 2, want 3", n)
	}
}

// readCountingStore counts the reads of nodes and logs the deliveries
// make, and the claims that found the caller held what they would read.
type readCountingStore struct {
	Store
	mu                   sync.Mutex
	reads, claims, holds int
}

func (s *readCountingStore) NodeByID(ctx context.Context, id int64) (*hub.Node, error) {
	s.mu.Lock()
	s.reads++
	s.mu.Unlock()
	return s.Store.NodeByID(ctx, id)
}

func (s *readCountingStore) EventsAfter(ctx context.Context, nodeID, after int64, limit int) ([]hub.Event, error) {
	s.mu.Lock()
	s.reads++
	s.mu.Unlock()
	return s.Store.EventsAfter(ctx, nodeID, after, limit)
}

func (s *readCountingStore) ClaimNodeDeliveries(ctx context.Context, now time.Time, nodeID int64, limit int, owner string, until time.Time, eventsLimit int, held hub.EventSpan) (*hub.NodeClaim, error) {
	c, err := s.Store.ClaimNodeDeliveries(ctx, now, nodeID, limit, owner, until, eventsLimit, held)
	if err == nil && len(c.Subscriptions) > 0 {
		s.mu.Lock()
		s.claims++
		if c.Held {
			s.holds++
		}
		s.mu.Unlock()
	}
	return c, err
}

func (s *readCountingStore) counts() (reads, claims, holds int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads, s.claims, s.holds
}

// TestPublishedItemsAreSentWithoutReadingThemBack: the deliveries of a
// publish start from what the publish appended, handed over in memory:
// the claim reads neither the node nor its log, nothing else does, and
// every subscriber gets the item as the log has it.
func TestPublishedItemsAreSentWithoutReadingThemBack(t *testing.T) {
	counting := &readCountingStore{}
	h := newHarness(t, func(c *Config) {
		counting.Store = c.Store
		c.Store = counting
		c.Now, c.PollInterval = time.Now, time.Hour
	})
	rc := newReceiver(t, h.clock)
	var ids []int64
	for i := range 3 {
		ids = append(ids, h.subscribe(rc.URL(fmt.Sprintf("/s%d", i)), hub.SubActive, hub.Options{}))
	}
	h.engine.settle(t) // the subscriptions' own wakes are over
	for _, item := range []string{"a", "b"} {
		h.publish(item)
		last := h.lastSeq()
		testenv.WaitFor(t, 15*time.Second, "every cursor at item "+item, func() bool {
			for _, id := range ids {
				if s := h.sub(id); s.Cursor != last || s.LeaseOwner != "" {
					return false
				}
			}
			return true
		})
	}
	for i := range ids {
		got := rc.deliveries(fmt.Sprintf("/s%d", i))
		if len(got) != 2 || !bytes.Contains(got[0].Body, []byte("<title>Title a</title>")) || !bytes.Contains(got[1].Body, []byte("<title>Title b</title>")) {
			t.Errorf("/s%d got %d deliveries, want item a then item b", i, len(got))
		}
	}
	reads, claims, holds := counting.counts()
	if claims == 0 || holds != claims || reads != 0 {
		t.Errorf("%d claims, %d of them holding the published items, %d reads of nodes and logs; want every claim holding them and no read", claims, holds, reads)
	}
}
