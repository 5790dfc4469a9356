package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
)

// xmppConsumer is a GetPingd XMPP consumer (whitelist) request body.
func xmppConsumer(action, jid string) string {
	return fmt.Sprintf(`<%s><consumer jid="%s"/></%s>`, action, jid, action)
}

// wantLimited checks a 429 with a Retry-After of whole seconds.
func wantLimited(t *testing.T, resp *http.Response, what string) {
	t.Helper()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("%s: status %d, want 429", what, resp.StatusCode)
		return
	}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || secs < 1 {
		t.Errorf("%s: Retry-After %q", what, resp.Header.Get("Retry-After"))
	}
}

// TestWhitelistRequestsToAnOpenNodeAreLimitedPerNode: 300 XMPP consumer
// requests for 300 JIDs to an open node (both request forms) are answered
// only within the node's burst, the rest 429; none leaves a membership
// behind. The owner's request, with the node's token, still goes through
// and is recorded. (The client's own bucket is widened so that the node's
// is what refuses.)
func TestWhitelistRequestsToAnOpenNodeAreLimitedPerNode(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SubscribeBurst = 1000 })
	token := e.createNode("open", hub.AccessOpen)
	ok, limited := 0, 0
	for i := range 300 {
		body := xmppConsumer("subscribe", fmt.Sprintf("reader%d@example.org/x", i))
		var resp *http.Response
		if i%2 == 0 {
			resp = e.subscribe("open", typeXMPPSub, "", body)
		} else {
			resp = e.do(http.MethodPost, "/feeds/open?method=subscribe", "", strings.NewReader(body), "Content-Type", typeXMPPSub)
		}
		switch resp.StatusCode {
		case http.StatusOK:
			ok++
			if got := string(readBody(t, resp)); got != fmt.Sprintf(`<subscribed jid="reader%d@example.org" node="open"/>`, i) {
				t.Errorf("answer %q", got)
			}
		case http.StatusTooManyRequests:
			limited++
			wantLimited(t, resp, "request "+strconv.Itoa(i))
		default:
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
	// The node's burst, and what it refills while the requests run.
	if ok < DefaultWhitelistNodeBurst || ok > DefaultWhitelistNodeBurst+10 || limited != 300-ok {
		t.Errorf("%d answered, %d refused; want about %d answered", ok, limited, DefaultWhitelistNodeBurst)
	}
	affs, err := e.hub.Affiliations(t.Context(), e.nodeOf("open"))
	if err != nil {
		t.Fatal(err)
	}
	if len(affs) != 0 {
		t.Fatalf("%d affiliations stored by requests without a token, want none", len(affs))
	}
	// The owner is not held up by the strangers.
	resp := e.subscribe("open", typeXMPPSub, token, xmppConsumer("subscribe", "friend@example.org"))
	wantStatus(t, resp, http.StatusOK)
	affs, err = e.hub.Affiliations(t.Context(), e.nodeOf("open"))
	if err != nil {
		t.Fatal(err)
	}
	if len(affs) != 1 || affs["friend@example.org"] != hub.AffMember {
		t.Errorf("affiliations after the owner's request: %v", affs)
	}
}

// TestWhitelistRequestsAreLimitedPerClient: XMPP consumer requests share
// the client's subscription bucket, tokens or not, whitelist node or open.
func TestWhitelistRequestsAreLimitedPerClient(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SubscribeRate, c.SubscribeBurst = 0.001, 5 })
	wl := e.createNode("wl", hub.AccessWhitelist)
	e.createNode("open", hub.AccessOpen)
	for i := range 5 {
		resp := e.subscribe("wl", typeXMPPSub, wl, xmppConsumer("subscribe", fmt.Sprintf("member%d@example.org", i)))
		wantStatus(t, resp, http.StatusOK)
	}
	wantLimited(t, e.subscribe("wl", typeXMPPSub, wl, xmppConsumer("subscribe", "late@example.org")), "with the node's token")
	wantLimited(t, e.subscribe("wl", typeXMPPSub, testAdminToken, xmppConsumer("unsubscribe", "member0@example.org")), "unsubscribe with the admin token")
	wantLimited(t, e.subscribe("open", typeXMPPSub, "", xmppConsumer("subscribe", "reader@example.org")), "another node")
	affs, err := e.hub.Affiliations(t.Context(), e.nodeOf("wl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(affs) != 5 || affs["late@example.org"] != "" || affs["member0@example.org"] != hub.AffMember {
		t.Errorf("the limited requests changed the whitelist: %v", affs)
	}
}
