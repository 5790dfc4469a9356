package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/internal/weblogs"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// TestPingRelay: accepted pings reach the configured ping servers (XML-RPC
// and GET), once per URL per minute, never when another pingd relayed them.
func TestPingRelay(t *testing.T) {
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	var mu sync.Mutex
	var calls []string // method:params for XML-RPC, the query for GET
	rpcSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call, err := xmlrpc.DecodeCall(r.Body, xmlrpc.Limits{MaxBytes: 1 << 20})
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		var parts []string
		for _, p := range call.Params {
			s, _ := p.(string)
			parts = append(parts, s)
		}
		mu.Lock()
		calls = append(calls, call.Method+":"+strings.Join(parts, ",")+":"+r.Header.Get(weblogs.RelayHeader))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/xml")
		io.WriteString(w, `<?xml version="1.0"?><methodResponse><params><param><value><struct><member><name>flerror</name><value><boolean>0</boolean></value></member><member><name>message</name><value>Thanks</value></member></struct></value></param></params></methodResponse>`)
	}))
	defer rpcSrv.Close()
	getSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, "GET:"+r.URL.RawQuery)
		mu.Unlock()
	}))
	defer getSrv.Close()
	brokenSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", 503) }))
	defer brokenSrv.Close()

	d := newDaemon(t, p, "PINGD_RELAY_PINGS=xmlrpc:"+rpcSrv.URL+"/RPC2, get:"+getSrv.URL+"/ping?name={name}&url={url} xmlrpc:"+brokenSrv.URL+"/RPC2")
	d.Start(true)
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), calls...)
	}

	if body := d.xmlrpc("weblogUpdates.ping", "A blog", "http://blog.example/"); !strings.Contains(body, "flerror") {
		t.Fatalf("ping: %s", body)
	}
	testenv.WaitFor(t, 10*time.Second, "the relays", func() bool { return len(got()) >= 2 })
	c := got()
	if !contains(c, "weblogUpdates.ping:A blog,http://blog.example/:1") || !contains(c, "GET:name=A+blog&url=http%3A%2F%2Fblog.example%2F") {
		t.Fatalf("relayed: %q", c)
	}
	// The same URL again within the minute: not relayed again.
	d.xmlrpc("weblogUpdates.ping", "A blog", "http://blog.example/")
	// extendedPing names the feed: relayed as extendedPing, tags too.
	d.xmlrpc("weblogUpdates.extendedPing", "B blog", "http://b.example/", "http://b.example/post", "http://b.example/feed.xml", "go|xmpp")
	testenv.WaitFor(t, 10*time.Second, "the extended relay", func() bool { return len(got()) >= 4 })
	// A ping another pingd relayed is not relayed again.
	req, _ := http.NewRequest(http.MethodPost, d.URL+"/ping", strings.NewReader(url.Values{"url": {"http://c.example/"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set(weblogs.RelayHeader, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Relays are queued while the ping is recorded, before its answer:
	// once the two working targets have nothing pending, every relay the
	// pings above queued has been sent.
	testenv.WaitFor(t, 10*time.Second, "nothing pending at the working targets", func() bool {
		var status struct {
			Targets []struct {
				Target  string `json:"target"`
				Pending int    `json:"pending"`
			} `json:"targets"`
		}
		if code := d.api("GET", "/api/relay", nil, &status); code != 200 {
			t.Fatalf("GET /api/relay: HTTP %d", code)
		}
		for _, target := range status.Targets {
			if !strings.Contains(target.Target, brokenSrv.URL) && target.Pending != 0 {
				return false
			}
		}
		return len(status.Targets) == 3
	})
	c = got()
	if len(c) != 4 || !contains(c, "weblogUpdates.extendedPing:B blog,http://b.example/,http://b.example/,http://b.example/feed.xml,go|xmpp:1") {
		t.Fatalf("relays after the repeat, the extended ping and a relayed ping: %q", c)
	}

	// The status per target.
	var status struct {
		Targets []struct {
			Target    string `json:"target"`
			Sent      int    `json:"sent"`
			Pending   int    `json:"pending"`
			LastError string `json:"last_error"`
		} `json:"targets"`
	}
	if code := d.api("GET", "/api/relay", nil, &status); code != 200 || len(status.Targets) != 3 {
		t.Fatalf("GET /api/relay: %d %+v", code, status)
	}
	b, _ := json.Marshal(status)
	if status.Targets[0].Sent != 2 || status.Targets[1].Sent != 2 || status.Targets[2].Pending != 2 || !strings.Contains(status.Targets[2].LastError, "503") {
		t.Errorf("relay status: %s", b)
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func TestRelayTargetsRefusePingdItself(t *testing.T) {
	cfg := &Config{HTTPAddr: "127.0.0.1:8080", PublicURL: "https://pingd.example.org", RelayPings: "xmlrpc:https://pingd.example.org/RPC2"}
	if _, err := cfg.RelayTargets(); err == nil || !strings.Contains(err.Error(), "itself") {
		t.Errorf("a relay to pingd's public URL: %v", err)
	}
	cfg.RelayPings = "get:http://127.0.0.1:8080/ping?url={url}"
	if _, err := cfg.RelayTargets(); err == nil {
		t.Error("a relay to pingd's own HTTP address was accepted")
	}
	cfg.RelayPings = "smtp:foo, xmlrpc:ftp://x/"
	if _, err := cfg.RelayTargets(); err == nil || strings.Count(err.Error(), "\n") != 1 {
		t.Errorf("two bad targets: %v", err)
	}
	cfg.RelayPings = "xmlrpc:http://rpc.example.org/RPC2 get:http://ping.example.org/?u={url}"
	if ts, err := cfg.RelayTargets(); err != nil || len(ts) != 2 || !ts[0].XMLRPC || ts[1].XMLRPC {
		t.Errorf("two good targets: %+v %v", ts, err)
	}
}
