package upstream

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/discovery"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/soap"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// rpcCloud is a loopback rssCloud cloud speaking XML-RPC or SOAP: it takes
// registerProcedure(notifyProcedure, port, path, protocol, urlList[,
// domain]), checks a registration that names a domain with a challenge
// GET (as rssCloud clouds do), otherwise notifies the caller's address,
// and notifies with a call of notifyProcedure(url) in its protocol.
type rpcCloud struct {
	*httptest.Server
	protocol  string // "xml-rpc" or "soap"
	procedure string
	// classic takes only seed 001's five parameters and faults on more.
	classic bool

	mu         sync.Mutex
	regs       int
	params     []any // of the last registration
	callback   string
	notifyProc string
}

func newRPCCloud(t *testing.T, protocol, procedure string, classic bool) *rpcCloud {
	c := &rpcCloud{protocol: protocol, procedure: procedure, classic: classic}
	c.Server = httptest.NewServer(http.HandlerFunc(c.register))
	t.Cleanup(c.Close)
	return c
}

func (c *rpcCloud) register(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	answer := func(ok bool, why string) {
		if c.protocol == "soap" {
			if why != "" {
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write(soap.MarshalFault(soap.FaultClient, why))
				return
			}
			_, _ = w.Write(soap.MarshalResponse(c.procedure, ok))
			return
		}
		if why != "" {
			_, _ = w.Write(xmlrpc.MarshalFault(&xmlrpc.Fault{Code: xmlrpc.FaultInvalidParams, Message: why}))
			return
		}
		b, _ := xmlrpc.MarshalResponse(ok)
		_, _ = w.Write(b)
	}
	var method string
	var params []any
	if c.protocol == "soap" {
		call, err := soap.DecodeCall(body)
		if err != nil || r.Header.Get("SOAPAction") != `"/`+c.procedure+`"` {
			answer(false, fmt.Sprintf("not a SOAP call with its SOAPAction: %v", err))
			return
		}
		method, params = call.Method, call.Params
	} else {
		call, err := xmlrpc.DecodeCall(bytes.NewReader(body), xmlrpc.Limits{})
		if err != nil {
			answer(false, err.Error())
			return
		}
		method, params = call.Method, call.Params
	}
	if method != c.procedure {
		answer(false, "unknown procedure "+method)
		return
	}
	if len(params) != 5 && (c.classic || len(params) != 6) {
		answer(false, fmt.Sprintf("%d parameters", len(params)))
		return
	}
	np, _ := params[0].(string)
	port := fmt.Sprint(params[1])
	path, _ := params[2].(string)
	protocol, _ := params[3].(string)
	urls, _ := params[4].([]any)
	if protocol != c.protocol || len(urls) != 1 {
		answer(false, "wrong protocol or urls")
		return
	}
	feedURL, _ := urls[0].(string)
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	if len(params) == 6 {
		host, _ = params[5].(string)
		cb := "http://" + net.JoinHostPort(host, port) + path
		resp, err := http.Get(cb + "?" + url.Values{"url": {feedURL}, "challenge": {"xyz"}}.Encode())
		if err != nil {
			answer(false, "")
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "xyz" {
			answer(false, "")
			return
		}
	}
	c.mu.Lock()
	c.regs++
	c.params = params
	c.callback = "http://" + net.JoinHostPort(host, port) + path
	c.notifyProc = np
	c.mu.Unlock()
	answer(true, "")
}

// notifyCall sends a notification of u in the cloud's protocol by
// calling procedure (the registered one unless given) with params (u
// unless given), and returns the HTTP answer and its result.
func (c *rpcCloud) notifyCall(t *testing.T, procedure string, params ...string) (*http.Response, bool, error) {
	t.Helper()
	c.mu.Lock()
	cb := c.callback
	if procedure == "" {
		procedure = c.notifyProc
	}
	c.mu.Unlock()
	var req *http.Request
	if c.protocol == "soap" {
		var ps []soap.Param
		for _, p := range params {
			ps = append(ps, soap.Param{Name: "url", Value: p})
		}
		body, err := soap.MarshalCall(procedure, ps...)
		if err != nil {
			t.Fatal(err)
		}
		req, _ = http.NewRequest(http.MethodPost, cb, bytes.NewReader(body))
		req.Header.Set("Content-Type", soap.ContentType)
		req.Header.Set("SOAPAction", soap.Action(procedure))
	} else {
		var ps []any
		for _, p := range params {
			ps = append(ps, p)
		}
		body, err := xmlrpc.MarshalCall(procedure, ps...)
		if err != nil {
			t.Fatal(err)
		}
		req, _ = http.NewRequest(http.MethodPost, cb, bytes.NewReader(body))
		req.Header.Set("Content-Type", "text/xml")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var ok bool
	if c.protocol == "soap" {
		ok, err = soap.DecodeBoolResponse(body)
	} else {
		ok, err = xmlrpc.DecodeBoolResponse(bytes.NewReader(body), xmlrpc.Limits{})
	}
	return resp, ok, err
}

// TestRSSCloudUpstreamOverRPC: a source whose <cloud> speaks xml-rpc (the
// seed's own example: xmlStorageSystem.rssPleaseNotify on /RPC2) or soap
// is registered with in that protocol, asking to be notified in it; the
// cloud's notification, a call of the procedure pingd named with the
// feed's URL, brings the change to the node and is answered true. Only
// the registered URL counts, and notifications are limited per callback.
func TestRSSCloudUpstreamOverRPC(t *testing.T) {
	for _, tc := range []struct {
		name, protocol, procedure string
		classic                   bool
	}{
		{"xml-rpc", "xml-rpc", "xmlStorageSystem.rssPleaseNotify", false},
		{"xml-rpc, five parameters only", "xml-rpc", "xmlStorageSystem.rssPleaseNotify", true},
		{"soap", "soap", "pleaseNotify", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvWith(t, func(c *Config) { c.NotifyRate, c.NotifyBurst = 0.1, 2 })
			cloud := newRPCCloud(t, tc.protocol, tc.procedure, tc.classic)
			site := newFeedSite(t)
			site.cloud = strings.TrimPrefix(cloud.URL, "http://")
			site.cloudProtocol, site.cloudPath, site.cloudProcedure = tc.protocol, "/RPC2", tc.procedure
			n, _ := e.follow(t, "blog", site.URL+"/rss", site.gets.Load)

			e.m.Check(e.ctx)
			ups := e.upstreams(t, n.SourceID)
			if len(ups) != 1 || ups[0].Kind != hub.UpstreamRSSCloud || ups[0].State != hub.UpstreamActive || cloud.regs != 1 {
				t.Fatalf("after registering: %+v (registrations %d)", ups, cloud.regs)
			}
			cbPath := fmt.Sprintf("/upstream/rsscloud/%d", ups[0].ID)
			want := []any{NotifyProcedure, strings.TrimPrefix(e.cb.URL, "http://127.0.0.1:"), cbPath, tc.protocol, []any{site.URL + "/rss"}, "127.0.0.1"}
			if tc.protocol == "xml-rpc" {
				port, _ := strconv.Atoi(want[1].(string))
				want[1] = port
			}
			if tc.classic {
				want = want[:5]
			}
			if fmt.Sprint(cloud.params) != fmt.Sprint(want) {
				t.Errorf("registration parameters %v\nwant %v", cloud.params, want)
			}

			// Refused: another URL, another procedure, no URL.
			if resp, ok, err := cloud.notifyCall(t, "", "http://127.0.0.1:9/not-registered"); err == nil || ok {
				t.Errorf("a notification for another URL: HTTP %d, %v, %v", resp.StatusCode, ok, err)
			}
			if _, ok, err := cloud.notifyCall(t, "other.procedure", site.URL+"/rss"); err == nil || ok {
				t.Errorf("a call of another procedure: %v, %v", ok, err)
			}
			if _, ok, err := cloud.notifyCall(t, ""); err == nil || ok {
				t.Errorf("a call without the URL: %v, %v", ok, err)
			}

			before := site.gets.Load()
			site.add("clouded")
			if resp, ok, err := cloud.notifyCall(t, "", site.URL+"/rss"); err != nil || !ok || resp.StatusCode != http.StatusOK {
				t.Fatalf("notification: HTTP %d, %v, %v", resp.StatusCode, ok, err)
			}
			testenv.WaitFor(t, 15*time.Second, "the notified entry", func() bool { return slices.Contains(e.items(t, n), "clouded") })
			if got := site.gets.Load() - before; got != 1 {
				t.Errorf("%d GETs after one notification, want 1", got)
			}
			// The limit per callback (here 2 in a burst): the second is
			// taken, the third refused with 429 and Retry-After.
			if _, ok, err := cloud.notifyCall(t, "", site.URL+"/rss"); err != nil || !ok {
				t.Errorf("second notification: %v, %v", ok, err)
			}
			resp, ok, err := cloud.notifyCall(t, "", site.URL+"/rss")
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "10" || ok || err == nil {
				t.Errorf("third notification: HTTP %d Retry-After %q, %v, %v", resp.StatusCode, resp.Header.Get("Retry-After"), ok, err)
			}

			// Re-registration every 24 hours, in the same protocol.
			e.clock.Advance(25 * time.Hour)
			e.m.Check(e.ctx)
			if cloud.regs != 2 {
				t.Errorf("not re-registered after 25 hours (%d)", cloud.regs)
			}
		})
	}
}

// TestRSSCloudUpstreamRefusals: a cloud that answers false, or a SOAP
// fault, leaves the registration failed with the reason, to be asked
// again later.
func TestRSSCloudUpstreamRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, protocol string
		answer         string
		want           string
	}{
		{"xml-rpc false", "xml-rpc", `<?xml version="1.0"?><methodResponse><params><param><value><boolean>0</boolean></value></param></params></methodResponse>`, "answered false"},
		{"soap fault", "soap", string(soap.MarshalFault(soap.FaultServer, "cloud is full")), "cloud is full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			cloud := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.protocol == "soap" {
					w.WriteHeader(http.StatusInternalServerError)
				}
				fmt.Fprint(w, tc.answer)
			}))
			t.Cleanup(cloud.Close)
			site := newFeedSite(t)
			site.cloud = strings.TrimPrefix(cloud.URL, "http://")
			site.cloudProtocol, site.cloudPath, site.cloudProcedure = tc.protocol, "/RPC2", "pleaseNotify"
			n, _ := e.follow(t, "blog", site.URL+"/rss", site.gets.Load)
			e.m.Check(e.ctx)
			ups := e.upstreams(t, n.SourceID)
			if len(ups) != 1 || ups[0].State != hub.UpstreamFailed || !strings.Contains(ups[0].LastError, tc.want) {
				t.Fatalf("after a refusal: %+v", ups)
			}
		})
	}
}

// TestCloudEndpoint: every protocol of seed 001 is registered with; an
// xml-rpc or soap cloud needs a procedure it can call; the protocol and
// procedure travel in the stored endpoint's fragment, never sent.
func TestCloudEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in   discovery.FoundCloud
		want string
	}{
		{discovery.FoundCloud{Domain: "rpc.example", Port: 80, Path: "/pleaseNotify", Protocol: "http-post"}, "http://rpc.example:80/pleaseNotify"},
		{discovery.FoundCloud{Domain: "rpc.example", Port: 5337, Path: "RPC2", Protocol: "xml-rpc", RegisterProcedure: "xmlStorageSystem.rssPleaseNotify"},
			"http://rpc.example:5337/RPC2#procedure=xmlStorageSystem.rssPleaseNotify&protocol=xml-rpc"},
		{discovery.FoundCloud{Domain: "rpc.example", Port: 80, Path: "/soap", Protocol: "soap", RegisterProcedure: "pleaseNotify"},
			"http://rpc.example:80/soap#procedure=pleaseNotify&protocol=soap"},
		{discovery.FoundCloud{Domain: "rpc.example", Port: 80, Path: "/RPC2", Protocol: "xml-rpc"}, ""},
		{discovery.FoundCloud{Domain: "rpc.example", Port: 80, Path: "/soap", Protocol: "soap", RegisterProcedure: "m:pleaseNotify"}, ""},
		{discovery.FoundCloud{Domain: "rpc.example", Port: 80, Path: "/x", Protocol: "XML-RPC", RegisterProcedure: "a.b"}, ""},
		{discovery.FoundCloud{Domain: "rpc.example", Port: 80, Path: "/x", Protocol: "smtp"}, ""},
	} {
		got := cloudEndpoint(tc.in)
		if got != tc.want {
			t.Errorf("cloudEndpoint(%+v) = %q, want %q", tc.in, got, tc.want)
			continue
		}
		if got == "" {
			continue
		}
		c := parseCloud(got)
		if c.protocol != tc.in.Protocol || (c.protocol != "http-post" && c.procedure != tc.in.RegisterProcedure) || strings.Contains(c.url, "#") {
			t.Errorf("parseCloud(%q) = %+v", got, c)
		}
	}
}
