package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

func testPings(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	var ids []int64
	for i := range 5 {
		p := &hub.Ping{Dialect: "xmlrpc-weblogupdates", Name: fmt.Sprintf("blog %d", i),
			URL: fmt.Sprintf("https://example.org/%d", i), Remote: "127.0.0.1", ReceivedAt: t0.Add(time.Duration(i) * time.Minute)}
		noErr(t, s.RecordPing(ctx, p))
		if p.ID == 0 {
			t.Fatal("RecordPing did not set the ID")
		}
		ids = append(ids, p.ID)
	}
	pings, total := must2(s.Pings(ctx, t0.Add(2*time.Minute), 0))(t)
	if total != 5 || len(pings) != 3 || pings[0].URL != "https://example.org/4" || pings[2].URL != "https://example.org/2" {
		t.Fatalf("pings since +2m: total %d, %+v", total, pings)
	}
	p := pings[0]
	if p.ID != ids[4] || p.Dialect != "xmlrpc-weblogupdates" || p.Name != "blog 4" || p.Remote != "127.0.0.1" ||
		!p.ReceivedAt.Equal(t0.Add(4*time.Minute)) || p.ReceivedAt.Location() != time.UTC {
		t.Fatalf("ping = %+v", p)
	}
	pings, _ = must2(s.Pings(ctx, time.Time{}, 2))(t)
	if len(pings) != 2 || pings[0].ID != ids[4] || pings[1].ID != ids[3] {
		t.Fatalf("limited pings = %+v", pings)
	}
	// The total counts pings ever received, pruned ones too.
	noErr(t, s.Prune(ctx, t0.Add(3*time.Minute)))
	pings, total = must2(s.Pings(ctx, time.Time{}, 0))(t)
	if total != 5 || len(pings) != 2 {
		t.Fatalf("after prune: total %d, %d pings", total, len(pings))
	}
	// A ping without a time gets one.
	p = hub.Ping{Dialect: "rest", URL: "https://example.org/now"}
	noErr(t, s.RecordPing(ctx, &p))
	if p.ReceivedAt.IsZero() {
		t.Fatal("ReceivedAt not set")
	}
	// An extendedPing keeps the weblog's URL and its feed apart.
	p = hub.Ping{Dialect: "xmlrpc-extended", URL: "https://example.org/", FeedURL: "https://example.org/feed.xml", ReceivedAt: t0.Add(time.Hour)}
	noErr(t, s.RecordPing(ctx, &p))
	pings, _ = must2(s.PingsBetween(ctx, t0.Add(time.Hour), t0.Add(2*time.Hour), 0))(t)
	if len(pings) != 1 || pings[0].URL != "https://example.org/" || pings[0].FeedURL != "https://example.org/feed.xml" {
		t.Fatalf("extendedPing read back as %+v", pings)
	}
}
