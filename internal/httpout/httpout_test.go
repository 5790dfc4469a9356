package httpout

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDoSendsAndCaps: the request carries the method, body, headers and
// User-Agent, and no more than the limit of the answer is read.
func TestDoSendsAndCaps(t *testing.T) {
	type seen struct{ method, ua, ct, extra, body string }
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 64)
		n, _ := r.Body.Read(b)
		got <- seen{r.Method, r.Header.Get("User-Agent"), r.Header.Get("Content-Type"), r.Header.Get("X-Extra"), string(b[:n])}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, strings.Repeat("x", 1000))
	}))
	t.Cleanup(srv.Close)
	resp, err := Do(context.Background(), srv.Client(), "pingd-test/1", 10, Request{
		Method: http.MethodPost, URL: srv.URL + "/cb", ContentType: "text/xml",
		Body: []byte("<a/>"), Header: http.Header{"X-Extra": {"1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusAccepted || string(resp.Body) != "xxxxxxxxxx" {
		t.Fatalf("response %d %q, want 202 and 10 bytes", resp.Status, resp.Body)
	}
	want := seen{http.MethodPost, "pingd-test/1", "text/xml", "1", "<a/>"}
	if s := <-got; s != want {
		t.Fatalf("server saw %+v, want %+v", s, want)
	}
}

// TestDoReadError: an answer cut short is an error, with the status that
// did arrive, not a short body taken for the whole answer.
func TestDoReadError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, "partial")
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	resp, err := Do(context.Background(), srv.Client(), "ua", 1<<20, Request{Method: http.MethodGet, URL: srv.URL + "/?token=secret"})
	if err == nil {
		t.Fatalf("a cut answer read as %q with no error", resp.Body)
	}
	if resp.Status != http.StatusOK {
		t.Fatalf("status %d, want the 200 that arrived", resp.Status)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Fatalf("error names the query: %v", err)
	}
}

// TestDoRedactsURL: transport and build errors name the URL without its
// query or user info, which callbacks use for secrets.
func TestDoRedactsURL(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	for name, u := range map[string]string{
		"refused": "http://user:pw-secret@" + closed + "/cb?hub.challenge=secret",
		"bad URL": "http://127.0.0.1/\x7f?token=secret",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Do(context.Background(), http.DefaultClient, "ua", 10, Request{Method: http.MethodGet, URL: u})
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("error names a secret: %v", err)
			}
			if name == "bad URL" && !errors.Is(err, ErrRequest) {
				t.Fatalf("a malformed URL is not ErrRequest: %v", err)
			}
			if name == "refused" && (errors.Is(err, ErrRequest) || !strings.Contains(err.Error(), closed+"/cb")) {
				t.Fatalf("transport error %v: want the host and path, not ErrRequest", err)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://u:p@h/p?x=1": "http://h/p?…",
		"http://h/p":         "http://h/p",
		"http://h/%zz":       "<unparsable URL>",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
