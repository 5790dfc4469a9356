package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gorilla/mux"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// fullQueueHub refuses every ping as hub.Hub does while its ping queue
// (hub.Config.PingCommitDelay) is full.
type fullQueueHub struct{}

func (fullQueueHub) Ping(context.Context, hub.Ping, []string, *hub.ChangeNote) (int, error) {
	return 0, hub.ErrPingQueueFull
}

// TestPingQueueFullIsOverload: a full ping queue is answered as the
// server's overload, 503 with Retry-After, in every dialect: the ping is
// not acknowledged.
func TestPingQueueFullIsOverload(t *testing.T) {
	s := Site{PublicURL: "http://pingd.test/"}
	rpc, err := NewRPC(RPCConfig{Site: s})
	if err != nil {
		t.Fatal(err)
	}
	pings, err := NewPings(PingsConfig{Site: s, Hub: fullQueueHub{}, RPC: rpc, Limits: NewPingLimits(PingLimitsConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	r := mux.NewRouter()
	rpc.Routes(r)
	pings.Routes(r)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)

	body, err := xmlrpc.MarshalCall("weblogUpdates.ping", "Blog", "http://blog.example/")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(srv.URL+"/RPC2", "text/xml", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("XML-RPC ping: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	resp, err = http.Get(srv.URL + "/ping?url=http%3A%2F%2Fblog.example%2F")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("GET ping: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}
