package hub_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/pingd/pingd/hub"
)

type pingHeard struct {
	mu   sync.Mutex
	recs []hub.PingRecord
}

func (p *pingHeard) PingRecorded(_ context.Context, rec hub.PingRecord) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recs = append(p.recs, rec)
}

// TestPingListeners: every listener hears of each recorded ping, with the
// URLs it named, how many followed sources it made due and whether another
// pingd relayed it; a ping the hub refuses is heard of by none.
func TestPingListeners(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	e.origin.serve("/feed", rss{title: "Feed", items: items("a")}.String(), true)
	e.createNode("n", "/feed")
	var first, second pingHeard
	e.hub.AddPingListener(&first)
	e.hub.AddPingListener(&second)

	feedURL := e.origin.url("/feed")
	if _, err := e.hub.Ping(ctx, hub.Ping{Dialect: "xmlrpc-extended", Name: "Blog"}, []string{feedURL, "http://blog.example.org/"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.hub.Ping(ctx, hub.Ping{Dialect: "rest", Relayed: true}, []string{"http://unknown.example.org/"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.hub.Ping(ctx, hub.Ping{Dialect: "rest"}, []string{"javascript:alert(1)"}, nil); err == nil {
		t.Fatal("a ping of a javascript: URL was recorded")
	}
	for name, l := range map[string]*pingHeard{"first": &first, "second": &second} {
		if len(l.recs) != 2 {
			t.Fatalf("%s listener heard %d pings, want the 2 recorded", name, len(l.recs))
		}
		got := l.recs[0]
		if got.Ping.Dialect != "xmlrpc-extended" || got.Ping.URL != feedURL || got.Ping.Name != "Blog" || got.Ping.ID == 0 ||
			!slices.Equal(got.URLs, []string{feedURL, "http://blog.example.org/"}) || got.Matched != 1 || got.Ping.Relayed {
			t.Errorf("%s listener heard %+v, want the stored extendedPing matching 1 source", name, got)
		}
		if got := l.recs[1]; got.Matched != 0 || !got.Ping.Relayed {
			t.Errorf("%s listener heard %+v, want the relayed ping matching nothing", name, got)
		}
	}
}
