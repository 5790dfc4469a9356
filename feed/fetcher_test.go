package feed

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/netguard"
)

var clock = time.Date(2024, 3, 10, 12, 0, 0, 0, time.UTC)

func rssDoc(items ...string) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="utf-8"?>` + "\n" + `<rss version="2.0"><channel><title>Test feed</title><link>http://example.org/</link><description>desc</description><ttl>30</ttl>`)
	for _, id := range items {
		fmt.Fprintf(&b, "\n<item><title>Item %s</title><link>http://example.org/%s</link><guid>%s</guid></item>", id, id, id)
	}
	b.WriteString("\n</channel></rss>")
	return b.String()
}

// feedServer is a loopback origin whose handlers tests set per path; it
// records the requests it got.
type feedServer struct {
	*httptest.Server
	mu       sync.Mutex
	handlers map[string]http.HandlerFunc
	requests []*http.Request
	conns    atomic.Int32
}

func newFeedServer(t *testing.T) *feedServer {
	t.Helper()
	fs := &feedServer{handlers: map[string]http.HandlerFunc{}}
	fs.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fs.mu.Lock()
		fs.requests = append(fs.requests, r.Clone(context.Background()))
		h := fs.handlers[r.URL.Path]
		fs.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	}))
	fs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			fs.conns.Add(1)
		}
	}
	fs.Start()
	t.Cleanup(fs.Close)
	return fs
}

func (fs *feedServer) handle(path string, h http.HandlerFunc) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.handlers[path] = h
}

func (fs *feedServer) serve(path, ctype, body string) {
	fs.handle(path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ctype)
		fmt.Fprint(w, body)
	})
}

func (fs *feedServer) redirect(path, to string, code int) {
	fs.handle(path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", to)
		w.WriteHeader(code)
	})
}

func (fs *feedServer) last() *http.Request {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.requests[len(fs.requests)-1]
}

func (fs *feedServer) all() []*http.Request {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return slices.Clone(fs.requests)
}

func testFetcher(cfg FetcherConfig) *Fetcher {
	cfg.AllowPrivate = true
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return clock }
	}
	if cfg.Version == "" {
		cfg.Version = "1.2.3"
	}
	return NewFetcher(cfg)
}

func fetch(t *testing.T, f *Fetcher, req hub.FetchRequest) (*hub.FetchResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return f.Fetch(ctx, req)
}

func TestFetchFull(t *testing.T) {
	fs := newFeedServer(t)
	body := rssDoc("b", "a")
	fs.handle("/feed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Last-Modified", "Sun, 10 Mar 2024 11:00:00 GMT")
		w.Header().Set("Cache-Control", "public, max-age=600")
		w.Header().Set("Expires", "Sun, 10 Mar 2024 13:00:00 GMT")
		fmt.Fprint(w, body)
	})
	res, err := fetch(t, testFetcher(FetcherConfig{PublicURL: "https://pingd.example"}), hub.FetchRequest{URL: fs.URL + "/feed", Subscribers: 7})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(body))
	checks := []struct {
		name      string
		got, want any
	}{
		{"Status", res.Status, 200},
		{"FinalURL", res.FinalURL, fs.URL + "/feed"},
		{"PermanentURL", res.PermanentURL, ""},
		{"ETag", res.ETag, `"v1"`},
		{"LastModified", res.LastModified, "Sun, 10 Mar 2024 11:00:00 GMT"},
		{"ContentType", res.ContentType, "application/rss+xml"},
		{"Body", string(res.Body), body},
		{"BodyHash", res.BodyHash, hex.EncodeToString(sum[:])},
		{"IsFeed", res.IsFeed, true},
		{"Title", res.Title, "Test feed"},
		{"Description", res.Description, "desc"},
		{"SiteURL", res.SiteURL, "http://example.org/"},
		{"ids", ids(&Document{Entries: res.Entries}), []string{"b", "a"}},
		{"TTL", res.Hints.TTL, 30 * time.Minute},
		{"MaxAge", res.Hints.MaxAge, 10 * time.Minute},
		{"Expires", res.Hints.Expires, clock.Add(time.Hour)},
		{"Gone", res.Gone, false},
		{"NotModified", res.NotModified, false},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if res.Bytes <= int64(len(body)) {
		t.Errorf("Bytes = %d, want more than the body (%d) with headers", res.Bytes, len(body))
	}
	r := fs.last()
	if got, want := r.Header.Get("User-Agent"), "pingd/1.2.3 (+https://pingd.example; 7 subscribers)"; got != want {
		t.Errorf("User-Agent %q, want %q", got, want)
	}
	if got := r.Header.Get("Accept-Encoding"); got != "gzip, deflate" {
		t.Errorf("Accept-Encoding %q", got)
	}
	for _, h := range []string{"If-None-Match", "If-Modified-Since", "A-IM"} {
		if v := r.Header.Get(h); v != "" {
			t.Errorf("unconditional fetch sent %s: %q", h, v)
		}
	}
}

func TestFetchConditional(t *testing.T) {
	fs := newFeedServer(t)
	fs.handle("/feed", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") == `"v1"` || r.Header.Get("If-Modified-Since") == "Sun, 10 Mar 2024 11:00:00 GMT" {
			w.Header().Set("ETag", `"v1"`)
			w.Header().Set("Cache-Control", "max-age=60")
			w.WriteHeader(http.StatusNotModified)
			return
		}
		fmt.Fprint(w, rssDoc("a"))
	})
	f := testFetcher(FetcherConfig{})
	tests := []struct {
		name string
		req  hub.FetchRequest
	}{
		{"etag", hub.FetchRequest{URL: fs.URL + "/feed", ETag: `"v1"`}},
		{"last-modified", hub.FetchRequest{URL: fs.URL + "/feed", LastModified: "Sun, 10 Mar 2024 11:00:00 GMT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := fetch(t, f, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if !res.NotModified || res.Status != 304 || res.Body != nil || res.Entries != nil {
				t.Errorf("result %+v, want a bare 304", res)
			}
			if res.Hints.MaxAge != time.Minute {
				t.Errorf("header hints on 304: %+v", res.Hints)
			}
			r := fs.last()
			if r.Header.Get("If-None-Match") != tt.req.ETag || r.Header.Get("If-Modified-Since") != tt.req.LastModified {
				t.Errorf("validators sent: %q %q", r.Header.Get("If-None-Match"), r.Header.Get("If-Modified-Since"))
			}
		})
	}
}

func TestFetchContentEncodingAndCharset(t *testing.T) {
	plain := rssDoc("x", "y", "z") + strings.Repeat("\n<!-- padding -->", 200)
	latin := latin1(t, strings.Replace(rssDoc("é"), `encoding="utf-8"`, `encoding="ISO-8859-1"`, 1))
	tests := []struct {
		name      string
		encoding  string
		ctype     string
		raw       []byte
		wantBody  string
		wantIDs   []string
		smallWire bool
	}{
		{"gzip", "gzip", "application/rss+xml", gzipBytes(t, []byte(plain)), plain, []string{"x", "y", "z"}, true},
		{"deflate", "deflate", "application/rss+xml", zlibBytes(t, []byte(plain)), plain, []string{"x", "y", "z"}, true},
		{"raw deflate", "deflate", "application/rss+xml", flateBytes(t, []byte(plain)), plain, []string{"x", "y", "z"}, true},
		{"iso-8859-1", "", "application/rss+xml", latin, strings.Replace(rssDoc("é"), `encoding="utf-8"`, `encoding="UTF-8"`, 1), []string{"é"}, false},
		{"gzip + windows-1252 header", "gzip", "text/xml; charset=windows-1252", gzipBytes(t, latin1(t, rssDoc("ü"))), strings.Replace(rssDoc("ü"), `encoding="utf-8"`, `encoding="UTF-8"`, 1), []string{"ü"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := newFeedServer(t)
			fs.handle("/feed", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.ctype)
				if tt.encoding != "" {
					w.Header().Set("Content-Encoding", tt.encoding)
				}
				w.Write(tt.raw)
			})
			res, err := fetch(t, testFetcher(FetcherConfig{}), hub.FetchRequest{URL: fs.URL + "/feed"})
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Body) != tt.wantBody {
				t.Errorf("body %q, want %q", res.Body, tt.wantBody)
			}
			if got := ids(&Document{Entries: res.Entries}); !slices.Equal(got, tt.wantIDs) {
				t.Errorf("ids %q, want %q", got, tt.wantIDs)
			}
			if tt.smallWire && res.Bytes >= int64(len(plain)) {
				t.Errorf("Bytes = %d, want the compressed size (< %d)", res.Bytes, len(plain))
			}
			if strings.Contains(tt.ctype, "charset") && !strings.Contains(res.ContentType, "utf-8") {
				t.Errorf("ContentType %q should say utf-8 after conversion", res.ContentType)
			}
		})
	}
}

func TestFetchSizeCap(t *testing.T) {
	big := rssDoc("a") + strings.Repeat(" ", 5000)
	tests := []struct {
		name     string
		encoding string
		raw      []byte
	}{
		{"plain body over the cap", "", []byte(big)},
		{"gzip bomb", "gzip", gzipBytes(t, make([]byte, 1<<20))},
		{"deflate bomb", "deflate", zlibBytes(t, make([]byte, 1<<20))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := newFeedServer(t)
			fs.handle("/feed", func(w http.ResponseWriter, r *http.Request) {
				if tt.encoding != "" {
					w.Header().Set("Content-Encoding", tt.encoding)
				}
				w.Write(tt.raw)
			})
			_, err := fetch(t, testFetcher(FetcherConfig{MaxBodyBytes: 4096}), hub.FetchRequest{URL: fs.URL + "/feed"})
			if !errors.Is(err, ErrBodyTooLarge) {
				t.Fatalf("err = %v, want ErrBodyTooLarge", err)
			}
			var fe *hub.FetchError
			if !errors.As(err, &fe) || fe.URL != fs.URL+"/feed" {
				t.Errorf("err %v is not a FetchError for the URL", err)
			}
		})
	}
}

func TestFetchRedirects(t *testing.T) {
	fs := newFeedServer(t)
	u := fs.URL
	fs.serve("/feed", "application/rss+xml", rssDoc("final"))
	fs.serve("/other", "application/rss+xml", rssDoc("other"))
	for _, code := range []int{301, 302, 303, 307, 308} {
		fs.redirect(fmt.Sprintf("/r%d", code), "/feed", code)
	}
	fs.redirect("/perm-then-temp", u+"/r302", 301)
	fs.redirect("/temp-then-perm", u+"/r301", 302)
	fs.redirect("/perm-perm", u+"/r308", 301)
	fs.redirect("/loop-a", "/loop-b", 302)
	fs.redirect("/loop-b", "/loop-a", 301)
	fs.redirect("/self", "/self", 301)
	for i := 1; i <= 6; i++ {
		fs.redirect(fmt.Sprintf("/hop%d", i), fmt.Sprintf("/hop%d", i+1), 302)
	}
	fs.serve("/hop7", "application/rss+xml", rssDoc("seven"))
	fs.redirect("/no-location", "", 302)
	fs.redirect("/bad-scheme", "ftp://example.org/feed", 301)
	fs.serve("/xml-redirect", "text/xml", `<?xml version="1.0"?><redirect><newLocation>`+u+`/other</newLocation></redirect>`)
	fs.serve("/xml-redirect-relative", "text/xml", `<redirect><newLocation>/other</newLocation></redirect>`)
	fs.serve("/xml-gone", "text/xml", `<?xml version="1.0"?><redirect><newLocation/></redirect>`)
	fs.serve("/xml-loop", "text/xml", `<redirect><newLocation>/xml-loop</newLocation></redirect>`)
	fs.redirect("/temp-to-xml", "/xml-redirect", 307)
	fs.handle("/gone", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusGone) })
	fs.redirect("/moved-gone", "/gone", 301)
	// A target spelled another way (zero-padded port, dot segment, empty
	// query) is followed and kept in canonical form.
	fs.redirect("/moved-spelled", strings.Replace(u, "127.0.0.1:", "127.0.0.1.:00", 1)+"/./other?", 301)

	tests := []struct {
		path          string
		wantFinal     string
		wantPermanent string
		wantGone      bool
		wantIDs       []string
		wantErr       error
	}{
		{"/r301", "/feed", "/feed", false, []string{"final"}, nil},
		{"/r308", "/feed", "/feed", false, []string{"final"}, nil},
		{"/r302", "/feed", "", false, []string{"final"}, nil},
		{"/r303", "/feed", "", false, []string{"final"}, nil},
		{"/r307", "/feed", "", false, []string{"final"}, nil},
		{"/perm-then-temp", "/feed", "/r302", false, []string{"final"}, nil},
		{"/temp-then-perm", "/feed", "", false, []string{"final"}, nil},
		{"/perm-perm", "/feed", "/feed", false, []string{"final"}, nil},
		{"/hop2", "/hop7", "", false, []string{"seven"}, nil}, // exactly 5 redirects
		{"/hop1", "", "", false, nil, ErrTooManyRedirects},    // 6 redirects
		{"/loop-a", "", "", false, nil, ErrRedirectLoop},
		{"/self", "", "", false, nil, ErrRedirectLoop},
		{"/no-location", "", "", false, nil, ErrBadRedirect},
		{"/bad-scheme", "", "", false, nil, ErrBadRedirect},
		{"/xml-redirect", "/other", "/other", false, []string{"other"}, nil},
		{"/xml-redirect-relative", "/other", "/other", false, []string{"other"}, nil},
		{"/temp-to-xml", "/other", "", false, []string{"other"}, nil},
		{"/xml-gone", "/xml-gone", "", true, nil, nil},
		{"/xml-loop", "", "", false, nil, ErrRedirectLoop},
		{"/gone", "/gone", "", true, nil, nil},
		{"/moved-gone", "/gone", "/gone", true, nil, nil},
		{"/moved-spelled", "/other", "/other", false, []string{"other"}, nil},
	}
	f := testFetcher(FetcherConfig{})
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res, err := fetch(t, f, hub.FetchRequest{URL: u + tt.path})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				var fe *hub.FetchError
				if !errors.As(err, &fe) {
					t.Fatalf("err %T is not a *hub.FetchError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.FinalURL != u+tt.wantFinal {
				t.Errorf("FinalURL = %q, want %q", res.FinalURL, u+tt.wantFinal)
			}
			wantPerm := ""
			if tt.wantPermanent != "" {
				wantPerm = u + tt.wantPermanent
			}
			if res.PermanentURL != wantPerm {
				t.Errorf("PermanentURL = %q, want %q", res.PermanentURL, wantPerm)
			}
			if res.Gone != tt.wantGone {
				t.Errorf("Gone = %v, want %v", res.Gone, tt.wantGone)
			}
			if got := ids(&Document{Entries: res.Entries}); !slices.Equal(got, tt.wantIDs) {
				t.Errorf("ids = %q, want %q", got, tt.wantIDs)
			}
		})
	}
}

func TestFetchHTTPErrors(t *testing.T) {
	fs := newFeedServer(t)
	fs.handle("/404", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	fs.handle("/500", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	fs.handle("/429", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(429)
	})
	fs.handle("/503", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "Sun, 10 Mar 2024 15:00:00 GMT")
		w.WriteHeader(503)
	})
	fs.handle("/503-past", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "Sun, 10 Mar 2024 10:00:00 GMT")
		w.WriteHeader(503)
	})
	fs.handle("/403-retry", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "120") // only meaningful on 429 and 503
		w.WriteHeader(403)
	})
	tests := []struct {
		path       string
		status     int
		retryAfter time.Time
	}{
		{"/404", 404, time.Time{}},
		{"/500", 500, time.Time{}},
		{"/429", 429, clock.Add(2 * time.Minute)},
		{"/503", 503, time.Date(2024, 3, 10, 15, 0, 0, 0, time.UTC)},
		{"/503-past", 503, time.Time{}},
		{"/403-retry", 403, time.Time{}},
	}
	f := testFetcher(FetcherConfig{})
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res, err := fetch(t, f, hub.FetchRequest{URL: fs.URL + tt.path})
			var fe *hub.FetchError
			if !errors.As(err, &fe) {
				t.Fatalf("res %+v err %v, want a FetchError", res, err)
			}
			if fe.Status != tt.status || hub.FetchStatus(err) != tt.status {
				t.Errorf("Status = %d, want %d", fe.Status, tt.status)
			}
			if !fe.RetryAfter.Equal(tt.retryAfter) {
				t.Errorf("RetryAfter = %v, want %v", fe.RetryAfter, tt.retryAfter)
			}
			if !errors.Is(err, ErrHTTPStatus) {
				t.Errorf("err %v does not wrap ErrHTTPStatus", err)
			}
		})
	}
}

func TestFetchRetryAfterHintOnSuccess(t *testing.T) {
	fs := newFeedServer(t)
	fs.handle("/feed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		fmt.Fprint(w, rssDoc("a"))
	})
	res, err := fetch(t, testFetcher(FetcherConfig{}), hub.FetchRequest{URL: fs.URL + "/feed"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Hints.RetryAfter.Equal(clock.Add(time.Hour)) {
		t.Errorf("RetryAfter hint = %v", res.Hints.RetryAfter)
	}
}

// deltaOrigin serves a feed with RFC 3229 "feed" deltas: versions are
// numbered; a request naming version n in If-None-Match with A-IM: feed
// gets the entries added since n.
type deltaOrigin struct {
	mu       sync.Mutex
	versions [][]string // versions[i] = ids, newest first
	badDelta bool
}

func (o *deltaOrigin) add(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	cur := o.versions[len(o.versions)-1]
	o.versions = append(o.versions, append([]string{id}, cur...))
}

func (o *deltaOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(o.versions) - 1
	etag := fmt.Sprintf(`"v%d"`, n)
	w.Header().Set("ETag", etag)
	w.Header().Set("Content-Type", "application/rss+xml")
	inm := r.Header.Get("If-None-Match")
	if inm == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	var base int
	if _, err := fmt.Sscanf(inm, `"v%d"`, &base); err == nil && base < n && hasToken(r.Header.Values("A-IM"), "feed") {
		w.Header().Set("IM", "feed")
		w.Header().Set("Cache-Control", "no-store, im")
		w.WriteHeader(http.StatusIMUsed)
		if o.badDelta {
			fmt.Fprint(w, "garbage")
			return
		}
		cur, old := o.versions[n], o.versions[base]
		fmt.Fprint(w, rssDoc(cur[:len(cur)-len(old)]...))
		return
	}
	fmt.Fprint(w, rssDoc(o.versions[n]...))
}

func TestFetchDelta(t *testing.T) {
	origin := &deltaOrigin{versions: [][]string{{"b", "a"}}}
	srv := httptest.NewServer(origin)
	defer srv.Close()
	f := testFetcher(FetcherConfig{})

	first, err := fetch(t, f, hub.FetchRequest{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	origin.add("c")
	origin.add("d")
	res, err := fetch(t, f, hub.FetchRequest{URL: srv.URL, ETag: first.ETag, Previous: first.Body})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != http.StatusIMUsed || res.ETag != `"v2"` || !res.Deltas {
		t.Errorf("Status %d ETag %s Deltas %v, want 226, the new ETag and the origin's deltas noted", res.Status, res.ETag, res.Deltas)
	}
	if first.Deltas {
		t.Error("a full answer to a request without A-IM noted deltas")
	}
	if got := ids(&Document{Entries: res.Entries}); !slices.Equal(got, []string{"d", "c", "b", "a"}) {
		t.Errorf("merged ids %q", got)
	}
	// The merged body is a full document: parsing it gives the same as a
	// full fetch of the current version.
	full, err := fetch(t, f, hub.FetchRequest{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(mustParse(t, res.Body, srv.URL, clock)), ids(&Document{Entries: full.Entries}); !slices.Equal(got, want) {
		t.Errorf("merged body ids %q, full fetch %q", got, want)
	}
	if res.Bytes >= full.Bytes {
		t.Errorf("delta cost %d bytes, full %d: the delta should be smaller", res.Bytes, full.Bytes)
	}
	if res.BodyHash != sha256hex(string(res.Body)) {
		t.Error("BodyHash is not the hash of the merged body")
	}

	// Unchanged since the merged version: 304.
	again, err := fetch(t, f, hub.FetchRequest{URL: srv.URL, ETag: res.ETag, Previous: res.Body})
	if err != nil {
		t.Fatal(err)
	}
	if !again.NotModified {
		t.Errorf("want 304, got %d", again.Status)
	}
}

// TestFetchDeltaLoadsPreviousOnlyForADelta: a request that carries
// LoadPrevious instead of the body asks for a delta, reads the last body
// only when a 226 comes (not for a 304 or a full 200), and falls back to
// the full document when it cannot read it.
func TestFetchDeltaLoadsPreviousOnlyForADelta(t *testing.T) {
	origin := &deltaOrigin{versions: [][]string{{"b", "a"}}}
	srv := httptest.NewServer(origin)
	defer srv.Close()
	f := testFetcher(FetcherConfig{})
	first, err := fetch(t, f, hub.FetchRequest{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	loads := 0
	var loadErr error
	req := hub.FetchRequest{URL: srv.URL, ETag: first.ETag, LoadPrevious: func(context.Context) ([]byte, error) {
		loads++
		return first.Body, loadErr
	}}

	if res, err := fetch(t, f, req); err != nil || !res.NotModified || loads != 0 {
		t.Fatalf("unchanged: %+v, %v, %d loads; want a 304 without reading the body", res, err, loads)
	}
	origin.add("c")
	res, err := fetch(t, f, req)
	if err != nil || res.Status != http.StatusIMUsed || loads != 1 {
		t.Fatalf("changed: status %d, %v, %d loads; want a 226 merged with the body read once", res.Status, err, loads)
	}
	if got := ids(&Document{Entries: res.Entries}); !slices.Equal(got, []string{"c", "b", "a"}) {
		t.Errorf("merged ids %q", got)
	}

	loadErr = errors.New("the store is away")
	res, err = fetch(t, f, req)
	if err != nil || res.Status != http.StatusOK || loads != 2 {
		t.Fatalf("body unreadable: status %d, %v, %d loads; want the full document after one try", res.Status, err, loads)
	}
	if got := ids(&Document{Entries: res.Entries}); !slices.Equal(got, []string{"c", "b", "a"}) {
		t.Errorf("full document ids %q", got)
	}

	// No body stored any more (nil, no error): the full document too.
	loadErr = nil
	req.LoadPrevious = func(context.Context) ([]byte, error) { loads++; return nil, nil }
	if res, err = fetch(t, f, req); err != nil || res.Status != http.StatusOK || loads != 3 || len(res.Entries) != 3 {
		t.Fatalf("no body stored: status %d, %v, %d loads, %d entries; want the full document", res.Status, err, loads, len(res.Entries))
	}
	// The origin sent a delta first: the result says so, for the body to
	// be kept this time (hub.KeepsBody).
	if !res.Deltas {
		t.Error("a full document asked for again after a delta does not note the origin's deltas")
	}

	// An origin that ignores A-IM and sends the whole changed document:
	// nothing to merge, nothing read.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"p2"`)
		fmt.Fprint(w, rssDoc("y", "x"))
	}))
	defer plain.Close()
	loads = 0
	res, err = fetch(t, f, hub.FetchRequest{URL: plain.URL, ETag: `"p1"`, LoadPrevious: func(context.Context) ([]byte, error) {
		loads++
		return []byte(rssDoc("x")), nil
	}})
	if err != nil || res.Status != http.StatusOK || loads != 0 || res.Deltas {
		t.Fatalf("full answer to a delta request: status %d, %v, %d loads, deltas %v; want a 200 without reading the body or noting deltas", res.Status, err, loads, res.Deltas)
	}
}

func TestFetchDeltaOnlyWhenAsked(t *testing.T) {
	origin := &deltaOrigin{versions: [][]string{{"a"}, {"b", "a"}}}
	srv := httptest.NewServer(origin)
	defer srv.Close()
	// An ETag but no previous body: no A-IM, so a full 200.
	res, err := fetch(t, testFetcher(FetcherConfig{}), hub.FetchRequest{URL: srv.URL, ETag: `"v0"`})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 200 || len(res.Entries) != 2 {
		t.Errorf("status %d with %d entries, want a full 200", res.Status, len(res.Entries))
	}
}

func TestFetchBadDeltaFallsBackToFull(t *testing.T) {
	origin := &deltaOrigin{versions: [][]string{{"a"}, {"b", "a"}}, badDelta: true}
	var aims []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		aims = append(aims, r.Header.Get("A-IM"))
		mu.Unlock()
		origin.ServeHTTP(w, r)
	}))
	defer srv.Close()
	res, err := fetch(t, testFetcher(FetcherConfig{}), hub.FetchRequest{URL: srv.URL, ETag: `"v0"`, Previous: []byte(rssDoc("a"))})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 200 || !slices.Equal(ids(&Document{Entries: res.Entries}), []string{"b", "a"}) {
		t.Errorf("status %d ids %q", res.Status, ids(&Document{Entries: res.Entries}))
	}
	if !slices.Equal(aims, []string{"feed", ""}) {
		t.Errorf("A-IM headers %q, want a delta request then a plain one", aims)
	}
}

func TestFetchUnaskedIMUsed(t *testing.T) {
	fs := newFeedServer(t)
	fs.handle("/feed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("IM", "feed")
		w.WriteHeader(http.StatusIMUsed)
		fmt.Fprint(w, rssDoc("x"))
	})
	_, err := fetch(t, testFetcher(FetcherConfig{}), hub.FetchRequest{URL: fs.URL + "/feed"})
	if hub.FetchStatus(err) != 226 || !errors.Is(err, ErrBadDelta) {
		t.Errorf("err = %v, want a 226 FetchError", err)
	}
}

func TestFetchNotAFeed(t *testing.T) {
	fs := newFeedServer(t)
	page := "<html><body>hello</body></html>"
	fs.serve("/page", "text/html", page)
	res, err := fetch(t, testFetcher(FetcherConfig{}), hub.FetchRequest{URL: fs.URL + "/page"})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsFeed || len(res.Entries) != 1 || res.Entries[0].ID != sha256hex(page) || res.Entries[0].Link != fs.URL+"/page" {
		t.Errorf("IsFeed %v entries %+v", res.IsFeed, res.Entries)
	}
}

func TestFetchNetworkErrors(t *testing.T) {
	// A port with nothing listening: take one and close it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/feed"
	l.Close()

	slow := newFeedServer(t)
	slow.handle("/feed", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})

	open := newFeedServer(t)
	open.serve("/feed", "application/rss+xml", rssDoc("a"))

	tests := []struct {
		name string
		f    *Fetcher
		url  string
		is   error
	}{
		{"connection refused", testFetcher(FetcherConfig{}), closed, nil},
		{"timeout", testFetcher(FetcherConfig{Timeout: 200 * time.Millisecond}), slow.URL + "/feed", context.DeadlineExceeded},
		{"loopback refused by the guard", NewFetcher(FetcherConfig{}), open.URL + "/feed", netguard.ErrRefused},
		{"invalid URL", testFetcher(FetcherConfig{}), "ftp://example.org/", hub.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fetch(t, tt.f, hub.FetchRequest{URL: tt.url})
			var fe *hub.FetchError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a FetchError", err)
			}
			if fe.Status != 0 {
				t.Errorf("Status = %d, want 0", fe.Status)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v, want %v", err, tt.is)
			}
		})
	}
	if got := open.conns.Load(); got != 0 {
		t.Errorf("the guard let %d connections through", got)
	}
}

func TestFetchRefusedMessage(t *testing.T) {
	open := newFeedServer(t)
	_, err := fetch(t, NewFetcher(FetcherConfig{}), hub.FetchRequest{URL: open.URL + "/feed"})
	if err == nil || !strings.Contains(err.Error(), "refused: 127.0.0.1 is a loopback address") {
		t.Errorf("err = %v", err)
	}
}

func TestFetchReusesConnections(t *testing.T) {
	fs := newFeedServer(t)
	fs.serve("/feed", "application/rss+xml", rssDoc("a"))
	fs.redirect("/moved", "/feed", 302)
	f := testFetcher(FetcherConfig{})
	for range 3 {
		if _, err := fetch(t, f, hub.FetchRequest{URL: fs.URL + "/moved"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := fs.conns.Load(); n != 1 {
		t.Errorf("%d connections for 6 requests, want 1", n)
	}
}

func TestUserAgent(t *testing.T) {
	tests := []struct {
		cfg  FetcherConfig
		n    int
		want string
	}{
		{FetcherConfig{Version: "0.1.0", PublicURL: "https://hub.example"}, 0, "pingd/0.1.0 (+https://hub.example; 0 subscribers)"},
		{FetcherConfig{Version: "0.1.0", PublicURL: "https://hub.example"}, 1500, "pingd/0.1.0 (+https://hub.example; 1500 subscribers)"},
		{FetcherConfig{}, 3, "pingd/dev (3 subscribers)"},
	}
	for _, tt := range tests {
		if got := NewFetcher(tt.cfg).UserAgent(tt.n); got != tt.want {
			t.Errorf("UserAgent = %q, want %q", got, tt.want)
		}
	}
}

func TestFetchConcurrent(t *testing.T) {
	fs := newFeedServer(t)
	fs.serve("/feed", "application/rss+xml", rssDoc("a", "b"))
	f := testFetcher(FetcherConfig{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			res, err := f.Fetch(context.Background(), hub.FetchRequest{URL: fs.URL + "/feed"})
			if err == nil && !bytes.Contains(res.Body, []byte("<guid>b</guid>")) {
				err = errors.New("wrong body")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestFetchDeltaTooLargeFallsBackToFull(t *testing.T) {
	fs := newFeedServer(t)
	fs.handle("/feed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v2"`)
		if r.Header.Get("A-IM") == "feed" {
			w.Header().Set("IM", "feed")
			w.WriteHeader(http.StatusIMUsed)
			fmt.Fprint(w, rssDoc("new", "newer"))
			return
		}
		fmt.Fprint(w, rssDoc("new", "newer", "old"))
	})
	var prevIDs []string
	for i := range 100 {
		prevIDs = append(prevIDs, fmt.Sprint("old", i))
	}
	previous := rssDoc(prevIDs...)
	f := testFetcher(FetcherConfig{MaxBodyBytes: int64(len(previous) + 20)})
	res, err := fetch(t, f, hub.FetchRequest{URL: fs.URL + "/feed", ETag: `"v1"`, Previous: []byte(previous)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 200 || !slices.Equal(ids(&Document{Entries: res.Entries}), []string{"new", "newer", "old"}) {
		t.Errorf("status %d ids %q, want the full document", res.Status, ids(&Document{Entries: res.Entries}))
	}
}

// TestFetchLinkHeaders: the final answer's Link header fields reach the
// result, parsed (several fields, several links each, quoted parameters,
// rel lists), resolved against the URL that answered; links about
// another resource (anchor), without a relation or to a non-http(s)
// target are left out, and so are the links of a redirect.
func TestFetchLinkHeaders(t *testing.T) {
	fs := newFeedServer(t)
	fs.handle("/old", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Link", `<https://redirect.example/hub>; rel="hub"`)
		w.Header().Set("Location", "/dir/feed")
		w.WriteHeader(http.StatusFound)
	})
	fs.handle("/dir/feed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Link", `<https://hub.example/>; title="hub, the first; \"quoted\""; rel="hub", <feed>; rel="self alternate"`)
		w.Header().Add("Link", `<https://elsewhere.example/hub>; rel=hub; anchor="https://elsewhere.example/", <ftp://files.example/>; rel=hub, <https://norel.example/>`)
		w.Header().Set("Content-Type", "application/rss+xml")
		fmt.Fprint(w, rssDoc("a"))
	})
	res, err := fetch(t, testFetcher(FetcherConfig{}), hub.FetchRequest{URL: fs.URL + "/old"})
	if err != nil {
		t.Fatal(err)
	}
	want := []hub.HeaderLink{
		{URL: "https://hub.example/", Rels: []string{"hub"}},
		{URL: fs.URL + "/dir/feed", Rels: []string{"self", "alternate"}},
	}
	if fmt.Sprint(res.Links) != fmt.Sprint(want) {
		t.Errorf("Links %+v\nwant  %+v", res.Links, want)
	}
	// A 304 carries no links: nothing was read.
	fs.handle("/same", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Link", `<https://hub.example/>; rel="hub"`)
		w.WriteHeader(http.StatusNotModified)
	})
	res, err = fetch(t, testFetcher(FetcherConfig{}), hub.FetchRequest{URL: fs.URL + "/same", ETag: `"x"`})
	if err != nil || !res.NotModified || res.Links != nil {
		t.Errorf("304: %+v, %v", res, err)
	}
}
