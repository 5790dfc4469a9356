package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/soap"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// TestPushFromUpstream: sources that advertise their own WebSub hub or
// rssCloud cloud are subscribed to there; a push from upstream reaches an
// XMPP subscriber with one fetch and no poll.
func TestPushFromUpstream(t *testing.T) {
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	p.Register("reader", "pw")

	// A WebSub hub that verifies intent and then pushes on demand.
	var hubMu sync.Mutex
	var callback, secret string
	hubSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		f := r.PostForm
		w.WriteHeader(http.StatusAccepted)
		go func() {
			q := url.Values{"hub.mode": {f.Get("hub.mode")}, "hub.topic": {f.Get("hub.topic")}, "hub.challenge": {"ch4llenge"}, "hub.lease_seconds": {"3600"}}
			resp, err := http.Get(f.Get("hub.callback") + "?" + q.Encode())
			if err != nil {
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) == "ch4llenge" && f.Get("hub.mode") == "subscribe" {
				hubMu.Lock()
				callback, secret = f.Get("hub.callback"), f.Get("hub.secret")
				hubMu.Unlock()
			}
		}()
	}))
	defer hubSrv.Close()
	// A cloud that checks with a challenge and then notifies on demand.
	var cloudMu sync.Mutex
	var cloudCallback string
	cloudSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		f := r.PostForm
		cb := "http://" + f.Get("domain") + ":" + f.Get("port") + f.Get("path")
		resp, err := http.Get(cb + "?" + url.Values{"url": {f.Get("url1")}, "challenge": {"abc"}}.Encode())
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) == "abc" {
				cloudMu.Lock()
				cloudCallback = cb
				cloudMu.Unlock()
				fmt.Fprint(w, `<notifyResult success="true" msg="ok"/>`)
				return
			}
		}
		fmt.Fprint(w, `<notifyResult success="false" msg="challenge failed"/>`)
	}))
	defer cloudSrv.Close()

	// Two feeds: Atom with a hub, RSS with a cloud; each counts its GETs.
	var mu sync.Mutex
	atomEntries, rssEntries := []string{"a0"}, []string{"r0"}
	var atomGets, rssGets atomic.Int64
	feeds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		base := "http://" + r.Host
		if r.URL.Path == "/atom" {
			atomGets.Add(1)
			w.Header().Set("Content-Type", "application/atom+xml")
			fmt.Fprintf(w, `<feed xmlns="http://www.w3.org/2005/Atom"><title>A</title><id>urn:a</id><updated>2031-01-01T00:00:00Z</updated><link rel="hub" href="%s/"/><link rel="self" href="%s/atom"/>`, hubSrv.URL, base)
			for _, e := range atomEntries {
				fmt.Fprintf(w, `<entry><id>urn:%s</id><title>Atom %s</title><updated>2031-01-01T00:00:00Z</updated><link href="%s/%s"/></entry>`, e, e, base, e)
			}
			fmt.Fprint(w, `</feed>`)
			return
		}
		rssGets.Add(1)
		host, port, _ := strings.Cut(strings.TrimPrefix(cloudSrv.URL, "http://"), ":")
		w.Header().Set("Content-Type", "application/rss+xml")
		fmt.Fprintf(w, `<rss version="2.0"><channel><title>R</title><link>%s/</link><description>d</description><cloud domain="%s" port="%s" path="/pleaseNotify" registerProcedure="" protocol="http-post"/>`, base, host, port)
		for _, e := range rssEntries {
			fmt.Fprintf(w, `<item><title>RSS %s</title><guid isPermaLink="false">%s</guid><link>%s/%s</link></item>`, e, e, base, e)
		}
		fmt.Fprint(w, `</channel></rss>`)
	}))
	defer feeds.Close()

	d := newDaemon(t, p, "PINGD_UPSTREAM_CHECK=1s")
	d.Start(true)
	for node, src := range map[string]string{"atom": feeds.URL + "/atom", "rss": feeds.URL + "/rss"} {
		if code := d.api("POST", "/api/nodes", map[string]string{"node": node, "source": src}, nil); code != 201 {
			t.Fatalf("create %s: HTTP %d", node, code)
		}
	}
	d.waitBaselined("atom", "rss")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	reader := testenv.Dial(ctx, t, p, "reader", "pw", "e2e")
	for _, node := range []string{"atom", "rss"} {
		if resp := subscribe(t, ctx, reader, p.ComponentDomain, node); !strings.Contains(resp, `subscription="subscribed"`) {
			t.Fatalf("subscribe %s: %s", node, resp)
		}
	}
	// Each node's newest item (its feed's entry at the first fetch) is sent
	// to the new subscription.
	if got := collectItems(t, reader, 2, 15*time.Second, 300*time.Millisecond); len(got) != 2 {
		t.Fatalf("sent on subscribing: %+v", got)
	}
	testenv.WaitFor(t, 20*time.Second, "the upstream subscriptions", func() bool {
		hubMu.Lock()
		defer hubMu.Unlock()
		cloudMu.Lock()
		defer cloudMu.Unlock()
		return callback != "" && cloudCallback != ""
	})
	var status struct {
		Upstream []struct {
			Kind  string `json:"kind"`
			State string `json:"state"`
		} `json:"upstream"`
	}
	testenv.WaitFor(t, 10*time.Second, "the WebSub subscription to be active", func() bool {
		d.api("GET", "/api/nodes/atom/status", nil, &status)
		return len(status.Upstream) == 1 && status.Upstream[0].Kind == "websub" && status.Upstream[0].State == "active"
	})
	atomBefore, rssBefore := atomGets.Load(), rssGets.Load()

	// WebSub: new content, pushed and signed.
	mu.Lock()
	atomEntries = append(atomEntries, "a1")
	mu.Unlock()
	body := "<feed/>"
	hubMu.Lock()
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	req, _ := http.NewRequest(http.MethodPost, callback, strings.NewReader(body))
	hubMu.Unlock()
	req.Header.Set("X-Hub-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := collectItems(t, reader, 1, 20*time.Second, 500*time.Millisecond)
	if len(got) != 1 || got[0].Title != "Atom a1" {
		t.Fatalf("after the WebSub push: %+v", got)
	}

	// rssCloud: a notification.
	mu.Lock()
	rssEntries = append(rssEntries, "r1")
	mu.Unlock()
	cloudMu.Lock()
	resp, err = http.PostForm(cloudCallback, url.Values{"url": {feeds.URL + "/rss"}})
	cloudMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got = collectItems(t, reader, 1, 20*time.Second, 500*time.Millisecond)
	if len(got) != 1 || got[0].Title != "RSS r1" {
		t.Fatalf("after the rssCloud notification: %+v", got)
	}
	if a, r := atomGets.Load()-atomBefore, rssGets.Load()-rssBefore; a != 1 || r != 1 {
		t.Errorf("fetches after one push each: atom %d, rss %d; want 1 and 1 (no polls)", a, r)
	}

	// rssCloud notifications are not signed: a flood of them is refused
	// beyond the limit per callback (1 a second in bursts of 10).
	codes := map[int]int{}
	for range 15 {
		resp, err := http.PostForm(cloudCallback, url.Values{"url": {feeds.URL + "/rss"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Errorf("a refused notification without Retry-After")
		}
	}
	if codes[http.StatusTooManyRequests] == 0 || codes[http.StatusOK]+codes[http.StatusTooManyRequests] != 15 {
		t.Errorf("15 notifications at once: %v; want some 200 and the rest 429", codes)
	}
}

// TestPushFromUpstreamRPCClouds: sources whose <cloud> speaks xml-rpc
// (the seed's example, xmlStorageSystem.rssPleaseNotify on /RPC2) or soap
// are registered with in that protocol; the cloud checks pingd with a
// challenge, notifies with a call of the procedure pingd named, and the
// change reaches an XMPP subscriber.
func TestPushFromUpstreamRPCClouds(t *testing.T) {
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	p.Register("reader", "pw")

	// One cloud, XML-RPC on /RPC2 and SOAP on /soap. It keeps, per
	// protocol, where and how to notify.
	type registration struct{ callback, procedure, url string }
	var cloudMu sync.Mutex
	regs := map[string]registration{}
	cloudSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var params []any
		protocol := "xml-rpc"
		if r.URL.Path == "/soap" {
			protocol = "soap"
			call, err := soap.DecodeCall(body)
			if err != nil || call.Method != "pleaseNotify" {
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write(soap.MarshalFault(soap.FaultClient, fmt.Sprint("bad call: ", err)))
				return
			}
			params = call.Params
		} else {
			call, err := xmlrpc.DecodeCall(bytes.NewReader(body), xmlrpc.Limits{})
			if err != nil || call.Method != "xmlStorageSystem.rssPleaseNotify" {
				_, _ = w.Write(xmlrpc.MarshalFault(&xmlrpc.Fault{Code: xmlrpc.FaultMethodNotFound, Message: fmt.Sprint("bad call: ", err)}))
				return
			}
			params = call.Params
		}
		ok := len(params) == 6 && params[3] == protocol
		var reg registration
		if ok {
			urls, _ := params[4].([]any)
			ok = len(urls) == 1
			if ok {
				reg = registration{callback: fmt.Sprintf("http://%s:%v%s", params[5], params[1], params[2]), procedure: fmt.Sprint(params[0]), url: fmt.Sprint(urls[0])}
				resp, err := http.Get(reg.callback + "?" + url.Values{"url": {reg.url}, "challenge": {"c-" + protocol}}.Encode())
				ok = err == nil
				if ok {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					ok = string(b) == "c-"+protocol
				}
			}
		}
		if ok {
			cloudMu.Lock()
			regs[protocol] = reg
			cloudMu.Unlock()
		}
		if protocol == "soap" {
			_, _ = w.Write(soap.MarshalResponse("pleaseNotify", ok))
			return
		}
		b, _ := xmlrpc.MarshalResponse(ok)
		_, _ = w.Write(b)
	}))
	defer cloudSrv.Close()
	host, port, _ := strings.Cut(strings.TrimPrefix(cloudSrv.URL, "http://"), ":")

	var mu sync.Mutex
	entries := map[string][]string{"/xmlrpc": {"x0"}, "/soap": {"s0"}}
	feeds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		base := "http://" + r.Host
		cloudTag := fmt.Sprintf(`<cloud domain="%s" port="%s" path="/RPC2" registerProcedure="xmlStorageSystem.rssPleaseNotify" protocol="xml-rpc"/>`, host, port)
		if r.URL.Path == "/soap" {
			cloudTag = fmt.Sprintf(`<cloud domain="%s" port="%s" path="/soap" registerProcedure="pleaseNotify" protocol="soap"/>`, host, port)
		}
		w.Header().Set("Content-Type", "application/rss+xml")
		fmt.Fprintf(w, `<rss version="2.0"><channel><title>R</title><link>%s/</link><description>d</description>%s`, base, cloudTag)
		for _, e := range entries[r.URL.Path] {
			fmt.Fprintf(w, `<item><title>Item %s</title><guid isPermaLink="false">%s</guid><link>%s/%s</link></item>`, e, e, base, e)
		}
		fmt.Fprint(w, `</channel></rss>`)
	}))
	defer feeds.Close()

	d := newDaemon(t, p, "PINGD_UPSTREAM_CHECK=1s")
	d.Start(true)
	for node, src := range map[string]string{"viaxmlrpc": feeds.URL + "/xmlrpc", "viasoap": feeds.URL + "/soap"} {
		if code := d.api("POST", "/api/nodes", map[string]string{"node": node, "source": src}, nil); code != 201 {
			t.Fatalf("create %s: HTTP %d", node, code)
		}
	}
	d.waitBaselined("viaxmlrpc", "viasoap")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	reader := testenv.Dial(ctx, t, p, "reader", "pw", "e2e")
	for _, node := range []string{"viaxmlrpc", "viasoap"} {
		if resp := subscribe(t, ctx, reader, p.ComponentDomain, node); !strings.Contains(resp, `subscription="subscribed"`) {
			t.Fatalf("subscribe %s: %s", node, resp)
		}
	}
	testenv.WaitFor(t, 20*time.Second, "the registrations with the cloud", func() bool {
		cloudMu.Lock()
		defer cloudMu.Unlock()
		return len(regs) == 2
	})
	collectItems(t, reader, 0, time.Second, time.Second) // whatever subscribing brings

	for _, tc := range []struct{ protocol, path, node, entry string }{
		{"xml-rpc", "/xmlrpc", "viaxmlrpc", "x1"},
		{"soap", "/soap", "viasoap", "s1"},
	} {
		mu.Lock()
		entries[tc.path] = append(entries[tc.path], tc.entry)
		mu.Unlock()
		cloudMu.Lock()
		reg := regs[tc.protocol]
		cloudMu.Unlock()
		if reg.url != feeds.URL+tc.path {
			t.Errorf("%s: registered for %q", tc.protocol, reg.url)
		}
		var req *http.Request
		if tc.protocol == "soap" {
			body, err := soap.MarshalCall(reg.procedure, soap.Param{Name: "url", Value: reg.url})
			if err != nil {
				t.Fatal(err)
			}
			req, _ = http.NewRequest(http.MethodPost, reg.callback, bytes.NewReader(body))
			req.Header.Set("Content-Type", soap.ContentType)
			req.Header.Set("SOAPAction", soap.Action(reg.procedure))
		} else {
			body, err := xmlrpc.MarshalCall(reg.procedure, reg.url)
			if err != nil {
				t.Fatal(err)
			}
			req, _ = http.NewRequest(http.MethodPost, reg.callback, bytes.NewReader(body))
			req.Header.Set("Content-Type", "text/xml")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var ok bool
		if tc.protocol == "soap" {
			ok, err = soap.DecodeBoolResponse(answer)
		} else {
			ok, err = xmlrpc.DecodeBoolResponse(bytes.NewReader(answer), xmlrpc.Limits{})
		}
		if !ok || err != nil {
			t.Fatalf("%s notification: HTTP %d, %v, %v\n%s", tc.protocol, resp.StatusCode, ok, err, answer)
		}
		got := collectItems(t, reader, 1, 20*time.Second, 500*time.Millisecond)
		if len(got) != 1 || got[0].Node != tc.node || got[0].Title != "Item "+tc.entry {
			t.Fatalf("after the %s notification: %+v", tc.protocol, got)
		}
	}
}
