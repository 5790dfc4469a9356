package component

import (
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// TestImplicitNodeCapOverXMPP: when the hub creates no implicit node (the
// cap reached, here none allowed), a reader who names a new feed is told
// why in plain words, and no node is made.
func TestImplicitNodeCapOverXMPP(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.stop()
	e.configure = func(cfg *Config) { cfg.LocalSources = true }
	e.startComponent(envOptions{hub: func(c *hub.Config) { c.MaxImplicitNodes = -1 }})
	alice := e.dial("alice", "local")
	const feedURL = "http://127.0.0.1:9/full.xml"
	got := chatSay(t, e, alice, "subscribe "+feedURL)
	if !strings.Contains(got, "cannot follow "+feedURL) || !strings.Contains(got, "follows only the URLs of its owners' nodes") {
		t.Fatalf("subscribing to a new feed with implicit nodes off answered %q", got)
	}
	if _, err := e.hub.NodeForURL(e.ctx, feedURL, false); err == nil {
		t.Fatal("a node was made for the feed")
	}
}
