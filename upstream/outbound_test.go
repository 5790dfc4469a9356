package upstream

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
)

// TestUpstreamErrorHidesHubQuery: a hub that cannot be reached leaves the
// upstream failed with an error that does not repeat the hub URL's query
// (hubs take keys there), as delivery keeps subscribers' queries out.
func TestUpstreamErrorHidesHubQuery(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	e := newEnv(t)
	site := newFeedSite(t)
	site.hubURL = "http://" + closed + "/hub?apikey=secret-token"
	n, _ := e.follow(t, "news", site.URL+"/feed.atom", site.gets.Load)
	e.m.Check(e.ctx)
	ups := e.upstreams(t, n.SourceID)
	if len(ups) != 1 || ups[0].State != hub.UpstreamFailed || ups[0].LastError == "" {
		t.Fatalf("an unreachable hub: %+v", ups)
	}
	if strings.Contains(ups[0].LastError, "secret-token") {
		t.Fatalf("stored error names the hub's key: %q", ups[0].LastError)
	}
}

// TestRSSCloudUpstreamCutAnswer: a cloud's answer cut short is reported
// as such, not read as a short document.
func TestRSSCloudUpstreamCutAnswer(t *testing.T) {
	e := newEnv(t)
	cloud := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "4096")
		fmt.Fprint(w, `<?xml version="1.0"?><methodResponse><params>`)
		w.(http.Flusher).Flush()
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(cloud.Close)
	site := newFeedSite(t)
	site.cloud = strings.TrimPrefix(cloud.URL, "http://")
	site.cloudProtocol, site.cloudPath, site.cloudProcedure = "xml-rpc", "/RPC2", "pleaseNotify"
	n, _ := e.follow(t, "blog", site.URL+"/rss", site.gets.Load)
	e.m.Check(e.ctx)
	ups := e.upstreams(t, n.SourceID)
	if len(ups) != 1 || ups[0].State != hub.UpstreamFailed || !strings.Contains(ups[0].LastError, "read answer") {
		t.Fatalf("after a cut answer: %+v", ups)
	}
}
