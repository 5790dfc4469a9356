package component

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/discovery"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/netguard"
	"github.com/pingd/pingd/internal/testenv"
)

// otherHost is a second virtual host of the test's Prosody: its users are
// not local to pubsub.localhost, whose parent domain is localhost.
const otherHost = "elsewhere.test"

// TestLocalUsersHaveNodesCreated: with LocalSources the users of the
// component's parent domain may have a node created for a new feed, by
// chat and by the ad-hoc command; a user of another domain is told why
// not and may still subscribe to the nodes there are; the per-JID limit
// answers with a time to try again; admins are not limited; with neither
// policy nobody may.
func TestLocalUsersHaveNodesCreated(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{prosody: testenv.ProsodyOptions{ExtraHosts: []string{otherHost}}})
	e.p.RegisterOn("carol", otherHost, password)
	e.stop()
	e.startComponentWith(func(cfg *Config) {
		cfg.LocalSources = true
		cfg.NodesPerHour = 2
	})
	alice := e.dial("alice", "local")
	carolJID := "carol@" + otherHost + "/remote"
	carol, err := testenv.DialAddr(e.ctx, e.p.C2SAddr, carolJID, password)
	if err != nil {
		t.Fatalf("log in as %s: %v", carolJID, err)
	}
	t.Cleanup(carol.Close)
	const base = "http://127.0.0.1:9/"
	nodeCount := func() int {
		t.Helper()
		nodes, err := e.hub.Nodes(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(nodes)
	}

	// A local user: a new feed gets an open node, by chat and by command.
	if got := chatSay(t, e, alice, "subscribe "+base+"a.xml"); !strings.Contains(got, `Subscribed to "`+base+`a.xml"`) {
		t.Fatalf("a local user's subscription to a new feed answered %q", got)
	}
	if n, err := e.hub.Node(e.ctx, base+"a.xml"); err != nil || n.AccessModel != hub.AccessOpen || n.SourceURL != base+"a.xml" {
		t.Fatalf("node for the feed: %+v, %v", n, err)
	}
	note := completedNote(t, command(t, e, alice, "pingd#subscribe", "complete", "s1", submitFields(map[string]string{"target": base + "b.xml"})), "info")
	if !strings.Contains(note, "Subscribed to") {
		t.Fatalf("the ad-hoc command for a new feed answered %q", note)
	}

	// A user of another domain: refused, with the reason, by chat and by
	// command; the nodes there are stay open to them.
	for _, got := range []string{
		chatSay(t, e, carol, "subscribe "+base+"c.xml"),
		completedNote(t, command(t, e, carol, "pingd#subscribe", "complete", "s2", submitFields(map[string]string{"target": base + "c.xml"})), "error"),
	} {
		if !strings.Contains(got, "only for users of its own XMPP server (localhost)") || !strings.Contains(got, "carol@"+otherHost) {
			t.Errorf("a remote user's subscription to a new feed answered %q", got)
		}
	}
	if got := nodeCount(); got != 2 {
		t.Fatalf("%d nodes after the remote user's refusals, want 2", got)
	}
	if got := chatSay(t, e, carol, "subscribe "+base+"a.xml"); !strings.Contains(got, "Subscribed to") {
		t.Errorf("a remote user's subscription to an existing node answered %q", got)
	}

	// The per-JID limit (2 an hour here): the third node is refused with
	// a time to try again; a URL that has its node is still subscribed.
	got := chatSay(t, e, alice, "subscribe "+base+"c.xml")
	if !regexp.MustCompile(`had 2 nodes created within the hour.*Try again in \d+ minutes?\.`).MatchString(got) {
		t.Errorf("over the limit, a new feed answered %q", got)
	}
	if got := nodeCount(); got != 2 {
		t.Fatalf("%d nodes after the refusal over the limit, want 2", got)
	}
	if got := chatSay(t, e, alice, "unsubscribe "+base+"a.xml"); !strings.Contains(got, "Unsubscribed") {
		t.Fatalf("unsubscribe answered %q", got)
	}
	if got := chatSay(t, e, alice, "subscribe "+base+"a.xml"); !strings.Contains(got, "Subscribed to") {
		t.Errorf("over the limit, a feed that has its node answered %q", got)
	}
	// PINGD_ADMINS are not limited.
	admin := e.dial("admin", "owner")
	for _, feed := range []string{"d.xml", "e.xml", "f.xml"} {
		if got := chatSay(t, e, admin, "subscribe "+base+feed); !strings.Contains(got, "Subscribed to") {
			t.Errorf("the admin's subscription to %s answered %q", feed, got)
		}
	}

	// Nobody (PINGD_OPEN_SOURCES=0): a local user is refused too.
	e.stop()
	e.startComponentWith(func(cfg *Config) {})
	alice = e.dial("alice", "closed")
	if got := chatSay(t, e, alice, "subscribe "+base+"g.xml"); !strings.Contains(got, "PINGD_OPEN_SOURCES") {
		t.Errorf("with node creation closed, a local user's subscription answered %q", got)
	}
	if got := nodeCount(); got != 5 {
		t.Errorf("%d nodes after the closed refusal, want 5", got)
	}
}

// TestCreatedSourcesMustBePublic: with the address check (CheckHost, as
// cmd/pingd sets it unless PINGD_ALLOW_PRIVATE), a user naming a feed at a
// loopback or private address is told so and no node is made.
func TestCreatedSourcesMustBePublic(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.stop()
	e.startComponentWith(func(cfg *Config) {
		cfg.LocalSources = true
		cfg.CheckHost = netguard.CheckHost
	})
	alice := e.dial("alice", "local")
	for _, u := range []string{"http://127.0.0.1:9/feed.xml", "http://10.1.2.3/feed.xml", "http://[::1]/feed.xml"} {
		if got := chatSay(t, e, alice, "subscribe "+u); !strings.Contains(got, "public addresses only") {
			t.Errorf("subscribe %s answered %q", u, got)
		}
	}
	if nodes, _ := e.hub.Nodes(e.ctx); len(nodes) != 0 {
		t.Errorf("refused sources made %d nodes", len(nodes))
	}
}

func TestRetryIn(t *testing.T) {
	for d, want := range map[string]string{
		"0s": "in 1 second", "1s": "in 1 second", "1.5s": "in 2 seconds", "59s": "in 59 seconds",
		"1m": "in 1 minute", "61s": "in 2 minutes", "2m59s": "in 3 minutes", "1h": "in 60 minutes",
	} {
		if got := retryIn(mustDuration(t, d)); got != want {
			t.Errorf("retryIn(%s) = %q, want %q", d, got, want)
		}
	}
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestLocalDomains: by default the component's parent domain is local;
// a list replaces it; what is not a domain is refused.
func TestLocalDomains(t *testing.T) {
	for _, tc := range []struct {
		component string
		list      []string
		want      []string
	}{
		{"pubsub.localhost", nil, []string{"localhost"}},
		{"pubsub.example.org", nil, []string{"example.org"}},
		{"pubsub.example.org", []string{" Example.COM ", "", "example.net"}, []string{"example.com", "example.net"}},
		{"pubsub", nil, nil},
		{"pubsub.org", nil, nil},
	} {
		set, err := localDomainSet(tc.list, jid.MustParse(tc.component))
		if err != nil {
			t.Errorf("%s %q: %v", tc.component, tc.list, err)
			continue
		}
		got := slices.Sorted(maps.Keys(set))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %q: local domains %q, want %q", tc.component, tc.list, got, tc.want)
		}
	}
	for _, bad := range []string{"user@example.org", "example.org/res"} {
		if _, err := localDomainSet([]string{bad}, jid.MustParse("pubsub.example.org")); err == nil {
			t.Errorf("local domain %q accepted", bad)
		}
	}
}

// TestRemoteUsersCannotHavePagesFetched: finding a page's feed fetches the
// page, so a user who may not have nodes made (a user of another domain
// where only local users may) is answered without pingd asking the page's
// server anything; a local user's page is looked at.
func TestRemoteUsersCannotHavePagesFetched(t *testing.T) {
	testenv.RequireProsody(t)
	var asked atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><title>Page</title></head><body>no feed here</body></html>`)
	}))
	defer site.Close()
	e := newEnv(t, envOptions{prosody: testenv.ProsodyOptions{ExtraHosts: []string{otherHost}}})
	e.p.RegisterOn("carol", otherHost, password)
	e.stop()
	e.startComponentWith(func(cfg *Config) {
		cfg.LocalSources = true
		cfg.Resolver = &discovery.Client{HTTP: netguard.NewClient(netguard.Options{AllowPrivate: true, Timeout: time.Minute})}
	})
	carolJID := "carol@" + otherHost + "/remote"
	carol, err := testenv.DialAddr(e.ctx, e.p.C2SAddr, carolJID, password)
	if err != nil {
		t.Fatalf("log in as %s: %v", carolJID, err)
	}
	t.Cleanup(carol.Close)
	for _, cmd := range []string{"subscribe", "unsubscribe"} {
		if got := chatSay(t, e, carol, cmd+" "+site.URL+"/page"); !strings.Contains(got, "No node follows") {
			t.Errorf("%s of a page by a remote user answered %q", cmd, got)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("the page was fetched %d times for a user who may not add feeds", n)
	}
	alice := e.dial("alice", "local")
	if got := chatSay(t, e, alice, "subscribe "+site.URL+"/page"); !strings.Contains(got, "could not find a feed") {
		t.Errorf("a local user's page answered %q", got)
	}
	if asked.Load() == 0 {
		t.Fatal("a local user's page was not looked at")
	}
}

// TestRefusedSourceNamesNoResolvedAddress: a feed refused because its
// name resolves to a non-public address is refused without the address
// pingd's resolver gave for the name: a reader learns no internal
// address that way.
func TestRefusedSourceNamesNoResolvedAddress(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.stop()
	e.startComponentWith(func(cfg *Config) {
		cfg.LocalSources = true
		cfg.CheckHost = netguard.CheckHost
	})
	alice := e.dial("alice", "local")
	got := chatSay(t, e, alice, "subscribe http://localhost:9/feed.xml")
	if !strings.Contains(got, "public addresses only") || strings.Contains(got, "127.0.0.1") || strings.Contains(got, "::1") {
		t.Errorf("subscribe to a name resolving to loopback answered %q", got)
	}
}
