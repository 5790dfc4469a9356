package component

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/pingd/pingd/discovery"
	"github.com/pingd/pingd/internal/testenv"
)

// nxdomainServer is a DNS server on a loopback UDP port that answers every
// question with NXDOMAIN ("no such host"), as a real resolver answers for
// a name under .invalid. It stops with the test.
func nxdomainServer(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, RecursionDesired: h.RecursionDesired,
				RecursionAvailable: true, RCode: dnsmessage.RCodeNameError})
			_ = b.StartQuestions()
			_ = b.Question(q)
			if out, err := b.Finish(); err == nil {
				_, _ = pc.WriteTo(out, addr)
			}
		}
	}()
	return pc.LocalAddr().String()
}

// TestChatAnswersAreFriendly: a reader is told in a short sentence why a
// URL could not be followed (no Go error, no resolver address, the URL
// named once), that a command was not understood (with a short list, not
// the whole help), and that subscribe takes a URL too. The failures are
// real: a name the resolver does not know, a closed port, a 404 and a
// page without feeds, all on loopback.
func TestChatAnswersAreFriendly(t *testing.T) {
	testenv.RequireProsody(t)
	dnsAddr := nxdomainServer(t)
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", dnsAddr)
	}}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gone" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><title>Page</title></head><body>no feed here</body></html>`)
	}))
	defer site.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closedURL := "http://" + closedAddr + "/feed.xml"
	closed.Close()

	e := newEnv(t, envOptions{})
	e.stop()
	e.startComponentWith(func(cfg *Config) {
		cfg.LocalSources = true
		cfg.Resolver = &discovery.Client{HTTP: &http.Client{Transport: &http.Transport{
			DialContext: (&net.Dialer{Resolver: resolver}).DialContext,
		}}}
	})
	alice := e.dial("alice", "friendly")

	const invalid = "http://example.invalid/feed.xml"
	for _, tc := range []struct {
		say, want, once string
	}{
		{"subscribe " + invalid, "pingd could not reach example.invalid: no such host.", "example.invalid"},
		{"subscribe " + closedURL, "pingd could not reach " + closedAddr + ": the connection was refused.", closedAddr},
		{"subscribe " + site.URL + "/gone", "pingd could not read " + site.URL + "/gone: the site answered 404 Not Found.", site.URL},
		{"subscribe " + site.URL + "/page", "pingd could not find a feed at " + site.URL + "/page: the page links to no RSS or Atom feed.", site.URL},
		{"frobnicate now", "I did not understand “frobnicate”. Commands: subscribe NODE-OR-URL, unsubscribe NODE, list, nodes, last NODE, help.", ""},
		{"subscribe nosuch", `There is no node called "nosuch". Send "nodes" to see them, or subscribe to a feed or web page by its URL`, ""},
	} {
		got := chatSay(t, e, alice, tc.say)
		if !strings.Contains(got, tc.want) {
			t.Errorf("%q answered %q, want %q", tc.say, got, tc.want)
		}
		for _, raw := range []string{"dial tcp", "lookup", dnsAddr, "Get \"", "discover ", "This is pingd", "connect:"} {
			if strings.Contains(got, raw) {
				t.Errorf("%q answered %q, which shows %q", tc.say, got, raw)
			}
		}
		if tc.once != "" && strings.Count(got, tc.once) != 1 {
			t.Errorf("%q answered %q, naming %s %d times", tc.say, got, tc.once, strings.Count(got, tc.once))
		}
	}

	// The ad-hoc command answers the same way.
	note := completedNote(t, command(t, e, alice, "pingd#subscribe", "complete", "f1", submitFields(map[string]string{"target": invalid})), "error")
	if note != "pingd could not reach example.invalid: no such host." {
		t.Errorf("the ad-hoc command answered %q", note)
	}
}
