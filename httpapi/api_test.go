package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/hub/fetching"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/internal/xmlrpc"
	"github.com/pingd/pingd/store"
)

const testAdminToken = "admin-token-for-tests"

// syncBuffer collects log output from concurrent handlers.
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

type env struct {
	t     *testing.T
	store store.Store
	hub   *hub.Hub
	api   *API
	srv   *httptest.Server
	clock *testenv.Clock
	ready atomic.Bool
	logs  *syncBuffer
}

// newEnv starts a hub on a real SQLite store and the API on a real
// loopback HTTP server. The hub's background loops are not run: the tests
// look at what the requests stored.
func newEnv(t *testing.T, tune ...func(*Config)) *env {
	t.Helper()
	return newEnvOn(t, nil, tune...)
}

// newEnvOn is newEnv with the hub on wrap(store) (the store itself when
// wrap is nil), e.g. to count the queries the API makes.
func newEnvOn(t *testing.T, wrap func(store.Store) store.Store, tune ...func(*Config)) *env {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "pingd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if wrap != nil {
		st = wrap(st)
	}
	e := &env{t: t, store: st, clock: testenv.NewClock(time.Now().UTC().Truncate(time.Second)), logs: &syncBuffer{}}
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// A fetch engine that is never run: the status page shows its limits.
	fetches, err := fetching.New(fetching.Config{Store: st, Fetcher: feed.NewFetcher(feed.FetcherConfig{}), Logger: log, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	e.hub, err = hub.New(hub.Config{Stores: store.HubStores(st), Fetches: fetches, Logger: log, Now: e.clock.Now, AdminToken: testAdminToken})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Hub:          e.hub,
		Store:        st,
		PublicURL:    "http://pingd.test:8080/",
		ComponentJID: "pubsub.localhost",
		Ready:        e.ready.Load,
		Logger:       log,
		Version:      "test",
	}
	for _, f := range tune {
		f(&cfg)
	}
	e.api, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(e.srv.Close)
	return e
}

// do sends a request; a token of "" sends no Authorization header.
func (e *env) do(method, path, token string, body io.Reader, header ...string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func (e *env) admin(method, path string, body any) *http.Response {
	e.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	return e.do(method, path, testAdminToken, r, "Content-Type", "application/json")
}

func readBody(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeJSON[T any](t *testing.T, resp *http.Response) T {
	t.Helper()
	var v T
	b := readBody(t, resp)
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func wantStatus(t *testing.T, resp *http.Response, code int) {
	t.Helper()
	if resp.StatusCode != code {
		t.Fatalf("%s %s: status %d, want %d; body: %s", resp.Request.Method, resp.Request.URL.Path,
			resp.StatusCode, code, readBody(t, resp))
	}
}

// rpc posts an XML-RPC call and decodes the answer with our decoder.
func (e *env) rpc(method string, params ...any) (*http.Response, any, error) {
	e.t.Helper()
	body, err := xmlrpc.MarshalCall(method, params...)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.rpcRaw(body)
}

func (e *env) rpcRaw(body []byte) (*http.Response, any, error) {
	e.t.Helper()
	resp := e.do(http.MethodPost, "/RPC2", "", bytes.NewReader(body), "Content-Type", "text/xml")
	if ct := resp.Header.Get("Content-Type"); ct != "text/xml" {
		e.t.Fatalf("XML-RPC answer has Content-Type %q, want text/xml", ct)
	}
	v, err := xmlrpc.DecodeResponse(resp.Body, xmlrpc.Limits{})
	return resp, v, err
}

// unsizedReader hides the length of a body, so the client sends it chunked.
type unsizedReader struct{ r io.Reader }

func (u *unsizedReader) Read(p []byte) (int, error) { return u.r.Read(p) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

// newMultipart writes fields as multipart/form-data and returns its
// Content-Type.
func newMultipart(w io.Writer, fields map[string]string) string {
	mw := multipart.NewWriter(w)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	_ = mw.Close()
	return mw.FormDataContentType()
}
