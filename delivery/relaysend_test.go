package delivery

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
)

// relayAttempt queues one ping for target, makes one attempt and returns
// the target's status as stored.
func relayAttempt(t *testing.T, target RelayTarget) hub.RelayTargetStatus {
	t.Helper()
	st := openTestStore(t)
	r := NewRelayer(RelayConfig{Store: st, Client: &http.Client{}, Targets: []RelayTarget{target},
		Instance: "test", UserAgent: "pingd-test", Logger: quietLogger()})
	ctx := t.Context()
	if err := r.Enqueue(ctx, hub.Ping{Name: "Blog"}, "http://blog.example.org/", ""); err != nil {
		t.Fatal(err)
	}
	r.sendDue(ctx)
	sts, err := st.RelayStatus(ctx)
	if err != nil || len(sts) != 1 {
		t.Fatalf("relay status %+v, %v", sts, err)
	}
	return sts[0]
}

// TestRelayErrorHidesTargetSecret: a relay target's query (ping servers
// take API keys there) stays out of the stored error, as a subscriber's
// does.
func TestRelayErrorHidesTargetSecret(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	u := "http://" + closed + "/ping?key=secret-token&url={url}"
	s := relayAttempt(t, RelayTarget{Spec: "get:" + u, URL: u})
	if s.Pending != 1 || s.LastError == "" {
		t.Fatalf("a refused connection is not a pending relay with an error: %+v", s)
	}
	if strings.Contains(s.LastError, "secret-token") {
		t.Fatalf("stored error names the target's key: %q", s.LastError)
	}
}

// TestRelayCutAnswerIsRetried: an answer cut short is a transport error,
// retried, not a short document judged as the ping server's refusal.
func TestRelayCutAnswerIsRetried(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "4096")
		fmt.Fprint(w, `<?xml version="1.0"?><methodResponse><params>`)
		w.(http.Flusher).Flush()
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	s := relayAttempt(t, RelayTarget{Spec: "xmlrpc:" + srv.URL + "/RPC2", XMLRPC: true, URL: srv.URL + "/RPC2"})
	if s.Pending != 1 || s.Failed != 0 || !strings.Contains(s.LastError, "read answer") {
		t.Fatalf("a cut answer: %+v, want pending with a read error", s)
	}
}
