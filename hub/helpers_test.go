package hub_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/hub/fetching"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// t0 is where every fake clock starts: a Sunday at 10:00 UTC.
var t0 = time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)

// openStore opens a real SQLite store in the test's temporary directory.
func openStore(t *testing.T) store.Store {
	t.Helper()
	return openStoreAt(t, filepath.Join(t.TempDir(), "pingd.db"))
}

// openStoreAt opens a real SQLite store in the file at path.
func openStoreAt(t *testing.T, path string) store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), path, store.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// testLogger writes to the test's output, shown when it fails or with -v.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

// recorder is a Transport that remembers what it was told: the wakes per
// node.
type recorder struct {
	mu    sync.Mutex
	wakes map[int64]int
}

func newRecorder() *recorder { return &recorder{wakes: map[int64]int{}} }

func (r *recorder) Wake(nodeID int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wakes[nodeID]++
}

func (r *recorder) wakesOf(nodeID int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wakes[nodeID]
}

// env is one hub on a real SQLite store, with the real feed fetcher and
// scheduler, a fake clock and a loopback origin for feeds.
type env struct {
	t      *testing.T
	store  store.Store
	dbPath string // the store's SQLite file
	hub    *hub.Hub
	engine *fetching.Engine
	clock  *testenv.Clock
	origin *origin
	rec    *recorder
}

type envOptions struct {
	adminToken string
	admins     []string
	scheduler  hub.Scheduler
	// baselineWait is fetching.Config.BaselineWait; zero keeps the default.
	baselineWait time.Duration
	// maxImplicitNodes is Config.MaxImplicitNodes; zero keeps the default.
	maxImplicitNodes int
	// fetchWorkers, fetchesPerHost and hostSpacing are the fetching.Config fields
	// of those names; zero keeps the default (no spacing).
	fetchWorkers, fetchesPerHost int
	hostSpacing                  time.Duration
	// wrap, if set, wraps the store the hub is given (counting calls).
	wrap func(store.Store) store.Store
}

// newEnv builds the hub without starting its background work; run starts it.
func newEnv(t *testing.T, opt envOptions) *env {
	t.Helper()
	e := &env{t: t, dbPath: filepath.Join(t.TempDir(), "pingd.db"), clock: testenv.NewClock(t0), origin: newOrigin(t), rec: newRecorder()}
	e.store = openStoreAt(t, e.dbPath)
	if opt.scheduler == nil {
		// No jitter: a schedule is exactly what the hints say.
		opt.scheduler = feed.NewScheduler(feed.SchedulerConfig{Rand: func() float64 { return 0.5 }})
	}
	fetcher := feed.NewFetcher(feed.FetcherConfig{
		Version: "test", PublicURL: "http://pingd.test", AllowPrivate: true,
		Timeout: 10 * time.Second, Now: e.clock.Now,
	})
	var hubStore store.Store = e.store
	if opt.wrap != nil {
		hubStore = opt.wrap(hubStore)
	}
	h, engine := newFetchingHub(t, hubStore, hub.Config{
		Fetcher: fetcher, Now: e.clock.Now,
		Instance: "test", AdminToken: opt.adminToken, Admins: opt.admins,
		Logger: testLogger(t), MaxImplicitNodes: opt.maxImplicitNodes,
	}, fetching.Config{
		Scheduler: opt.scheduler, FetchWorkers: opt.fetchWorkers, FetchesPerHost: opt.fetchesPerHost,
		FetchHostSpacing: opt.hostSpacing, FetchTimeout: 10 * time.Second, BaselineWait: opt.baselineWait,
	})
	e.engine = engine
	h.Register(e.rec, hub.Kinds...)
	e.hub = h
	return e
}

// newFetchingHub makes a hub on st with a fetch engine on the same store,
// clock, instance, logger and fetcher, as cmd/pingd wires them.
func newFetchingHub(t *testing.T, st store.Store, hc hub.Config, fc fetching.Config) (*hub.Hub, *fetching.Engine) {
	t.Helper()
	fc.Store, fc.Fetcher, fc.Now, fc.Instance, fc.Logger = st, hc.Fetcher, hc.Now, hc.Instance, hc.Logger
	engine, err := fetching.New(fc)
	if err != nil {
		t.Fatalf("fetching.New: %v", err)
	}
	hc.Stores, hc.Fetches = store.HubStores(st), engine
	if r, ok := hc.Fetcher.(hub.EntryReader); ok && hc.Entries == nil {
		hc.Entries = r // the feed fetcher, as cmd/pingd gives it
	}
	h, err := hub.New(hc)
	if err != nil {
		t.Fatalf("hub.New: %v", err)
	}
	return h, engine
}

// run starts the hub's background work until the test ends, and checks
// that Run returns once its context is cancelled. It returns once Run runs.
func (e *env) run() {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.hub.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				e.t.Errorf("Run: %v", err)
			}
		case <-time.After(15 * time.Second):
			e.t.Errorf("Run did not return after its context ended")
		}
	})
	// Learning of a source waits for its baseline only once Run runs.
	testenv.WaitFor(e.t, 20*time.Second, "Run to start", e.engine.Running)
}

// createNode creates a node following the origin's path, failing the test
// on error.
func (e *env) createNode(name, path string) *hub.Node {
	e.t.Helper()
	spec := hub.NodeSpec{Name: name, Config: hub.DefaultNodeConfig()}
	if path != "" {
		spec.Source = e.origin.url(path)
	}
	n, _, err := e.hub.CreateNode(e.t.Context(), spec)
	if err != nil {
		e.t.Fatalf("CreateNode(%q): %v", name, err)
	}
	return n
}

func (e *env) source(id int64) *hub.Source {
	e.t.Helper()
	src, err := e.store.Source(e.t.Context(), id)
	if err != nil {
		e.t.Fatalf("Source(%d): %v", id, err)
	}
	return src
}

func (e *env) node(name string) *hub.Node {
	e.t.Helper()
	n, err := e.store.Node(e.t.Context(), name)
	if err != nil {
		e.t.Fatalf("Node(%q): %v", name, err)
	}
	return n
}

// events returns the events of the node's log that its subscribers are
// told: those after its XMPP cursor, which no component moves in these
// tests, so it stands where a baseline's kept items left it.
func (e *env) events(nodeID int64) []hub.Event {
	e.t.Helper()
	n, err := e.store.NodeByID(e.t.Context(), nodeID)
	if err != nil {
		e.t.Fatalf("NodeByID: %v", err)
	}
	evs, err := e.store.EventsAfter(e.t.Context(), nodeID, n.XMPPSeq, 0)
	if err != nil {
		e.t.Fatalf("EventsAfter: %v", err)
	}
	return evs
}

// waitFetched waits until the source's last fetch happened at the clock's
// current reading and its outcome is stored (the lease is released). Tests
// move the clock before each fetch they trigger so that fetches are told
// apart by their time.
func (e *env) waitFetched(srcID int64) *hub.Source {
	e.t.Helper()
	now := e.clock.Now()
	var src *hub.Source
	testenv.WaitFor(e.t, 20*time.Second, fmt.Sprintf("fetch of source %d at %s", srcID, now.Format(time.TimeOnly)), func() bool {
		src = e.source(srcID)
		return src.LastFetchAt.Equal(now) && src.LeaseOwner == ""
	})
	return src
}

// ping moves the clock by a second, announces a change of the URL the way
// the HTTP side does, and waits for the fetch it causes.
func (e *env) ping(srcID int64, rawURL string, note *hub.ChangeNote) *hub.Source {
	e.t.Helper()
	e.clock.Advance(time.Second)
	n, err := e.hub.Changed(e.t.Context(), rawURL, note)
	if err != nil {
		e.t.Fatalf("Changed(%s): %v", rawURL, err)
	}
	if n == 0 {
		e.t.Fatalf("Changed(%s) scheduled no source", rawURL)
	}
	return e.waitFetched(srcID)
}

// settle makes the fetch loop run one claim pass at the clock's current
// reading and waits until that pass is over: it pings a sentinel source
// (which must follow the origin's /sentinel path through some node) and
// waits for its fetch. Any other source due by then was claimed in the
// same pass.
func (e *env) settle(sentinel int64) {
	e.t.Helper()
	before := e.origin.hitCount("/sentinel")
	if _, err := e.hub.Changed(e.t.Context(), e.origin.url("/sentinel"), nil); err != nil {
		e.t.Fatalf("ping sentinel: %v", err)
	}
	testenv.WaitFor(e.t, 20*time.Second, "the sentinel's fetch", func() bool { return e.origin.hitCount("/sentinel") > before })
	e.waitFetched(sentinel)
}

// origin is a loopback web server whose handlers tests set per path; it
// counts the requests per path and keeps their User-Agents.
type origin struct {
	*httptest.Server
	mu       sync.Mutex
	handlers map[string]http.HandlerFunc
	hits     map[string]int
	agents   map[string][]string
}

func newOrigin(t *testing.T) *origin {
	o := &origin{handlers: map[string]http.HandlerFunc{}, hits: map[string]int{}, agents: map[string][]string{}}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.hits[r.URL.Path]++
		o.agents[r.URL.Path] = append(o.agents[r.URL.Path], r.Header.Get("User-Agent"))
		h := o.handlers[r.URL.Path]
		o.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	}))
	t.Cleanup(o.Close)
	o.handle("/sentinel", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		fmt.Fprint(w, rss{title: "sentinel"}.String())
	})
	return o
}

func (o *origin) url(path string) string { return o.URL + path }

func (o *origin) handle(path string, h http.HandlerFunc) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.handlers[path] = h
}

func (o *origin) hitCount(path string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hits[path]
}

func (o *origin) userAgents(path string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.agents[path]...)
}

// feedDoc is a document an origin serves and a test changes.
type feedDoc struct {
	mu   sync.Mutex
	body string
	// etags makes the origin send a strong ETag and answer a matching
	// If-None-Match with 304.
	etags bool
}

func (d *feedDoc) set(body string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.body = body
}

func (d *feedDoc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	body, etags := d.body, d.etags
	d.mu.Unlock()
	w.Header().Set("Content-Type", "application/rss+xml; charset=utf-8")
	if etags {
		sum := sha256.Sum256([]byte(body))
		tag := `"` + hex.EncodeToString(sum[:8]) + `"`
		w.Header().Set("ETag", tag)
		if r.Header.Get("If-None-Match") == tag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	fmt.Fprint(w, body)
}

// serve makes the origin serve a changeable document at path.
func (o *origin) serve(path, body string, etags bool) *feedDoc {
	d := &feedDoc{body: body, etags: etags}
	o.handle(path, d.ServeHTTP)
	return d
}

// rss is an RSS 2.0 document; its items are listed newest first, as feeds
// do.
type rss struct {
	title     string
	link      string
	ttl       int
	skipHours []int
	items     []item
}

type item struct {
	id    string
	title string
	date  time.Time // zero: no pubDate
}

func (f rss) String() string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="utf-8"?>` + "\n<rss version=\"2.0\"><channel>")
	fmt.Fprintf(&b, "<title>%s</title><description>a test feed</description>", f.title)
	if f.link != "" {
		fmt.Fprintf(&b, "<link>%s</link>", f.link)
	}
	if f.ttl > 0 {
		fmt.Fprintf(&b, "<ttl>%d</ttl>", f.ttl)
	}
	if len(f.skipHours) > 0 {
		b.WriteString("<skipHours>")
		for _, h := range f.skipHours {
			fmt.Fprintf(&b, "<hour>%d</hour>", h)
		}
		b.WriteString("</skipHours>")
	}
	for _, it := range f.items {
		title := it.title
		if title == "" {
			title = "Item " + it.id
		}
		fmt.Fprintf(&b, "\n<item><title>%s</title><link>http://example.org/%s</link><guid isPermaLink=\"false\">%s</guid>",
			title, it.id, it.id)
		if !it.date.IsZero() {
			fmt.Fprintf(&b, "<pubDate>%s</pubDate>", it.date.Format(time.RFC1123Z))
		}
		b.WriteString("</item>")
	}
	b.WriteString("\n</channel></rss>")
	return b.String()
}

// items builds undated items with the given ids, in the order given.
func items(ids ...string) []item {
	out := make([]item, len(ids))
	for i, id := range ids {
		out[i] = item{id: id}
	}
	return out
}

// itemIDs lists the item ids of a log's item events, in log order.
func itemIDs(evs []hub.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Kind == hub.EventItem {
			out = append(out, ev.ItemID)
		}
	}
	return out
}

func kinds(evs []hub.Event) []hub.EventKind {
	out := make([]hub.EventKind, len(evs))
	for i, ev := range evs {
		out[i] = ev.Kind
	}
	return out
}

func mustErrIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
}
