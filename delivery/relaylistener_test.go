package delivery_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/hub"
)

// queuedRelays is a relay queue that only remembers what was queued: the
// listener's decisions are what is under test, not the SQL queue.
type queuedRelays struct {
	mu     sync.Mutex
	queued []hub.Relay
}

func (q *queuedRelays) EnqueueRelay(_ context.Context, r *hub.Relay, _ time.Duration) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queued = append(q.queued, *r)
	return true, nil
}
func (q *queuedRelays) ClaimRelays(context.Context, time.Time, int, string, time.Time) ([]hub.Relay, error) {
	return nil, nil
}
func (q *queuedRelays) FinishRelay(context.Context, *hub.Relay) error { return nil }
func (q *queuedRelays) RelayStatus(context.Context) ([]hub.RelayTargetStatus, error) {
	return nil, nil
}
func (q *queuedRelays) PruneRelays(context.Context, time.Time) error { return nil }

// TestRelayerHearsWeblogPings: as the hub's ping listener the Relayer
// queues weblog pings for every target, with extendedPing's page and feed
// apart, and leaves relayed pings and those of other dialects alone.
func TestRelayerHearsWeblogPings(t *testing.T) {
	q := &queuedRelays{}
	r := delivery.NewRelayer(delivery.RelayConfig{Store: q, Targets: []delivery.RelayTarget{
		{Spec: "xmlrpc:http://127.0.0.1:9/RPC2", XMLRPC: true, URL: "http://127.0.0.1:9/RPC2"},
		{Spec: "get:http://127.0.0.1:9/ping?url={url}", URL: "http://127.0.0.1:9/ping?url={url}"},
	}})
	ctx := t.Context()
	r.PingRecorded(ctx, hub.PingRecord{Ping: hub.Ping{Dialect: "xmlrpc-weblogupdates", Name: "Blog", URL: "http://blog.example.org/"},
		URLs: []string{"http://blog.example.org/"}})
	r.PingRecorded(ctx, hub.PingRecord{Ping: hub.Ping{Dialect: "xmlrpc-extended", Name: "Blog", Tags: []string{"go"}},
		URLs: []string{"http://blog.example.org/feed", "http://blog.example.org/", "http://blog.example.org/post"}})
	r.PingRecorded(ctx, hub.PingRecord{Ping: hub.Ping{Dialect: "rest", Relayed: true}, URLs: []string{"http://relayed.example.org/"}})
	r.PingRecorded(ctx, hub.PingRecord{Ping: hub.Ping{Dialect: "websub"}, URLs: []string{"http://topic.example.org/"}})
	r.PingRecorded(ctx, hub.PingRecord{Ping: hub.Ping{Dialect: "cnws"}, URLs: []string{"http://resource.example.org/"}})

	type relay struct{ target, url, feed string }
	var got []relay
	for _, rel := range q.queued {
		got = append(got, relay{rel.Target, rel.URL, rel.FeedURL})
	}
	want := []relay{
		{"xmlrpc:http://127.0.0.1:9/RPC2", "http://blog.example.org/", ""},
		{"get:http://127.0.0.1:9/ping?url={url}", "http://blog.example.org/", ""},
		{"xmlrpc:http://127.0.0.1:9/RPC2", "http://blog.example.org/", "http://blog.example.org/feed"},
		{"get:http://127.0.0.1:9/ping?url={url}", "http://blog.example.org/", "http://blog.example.org/feed"},
	}
	if len(got) != len(want) {
		t.Fatalf("queued %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("relay %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if len(q.queued) == 4 && (len(q.queued[2].Tags) != 1 || q.queued[2].Name != "Blog") {
		t.Errorf("extendedPing relay lost its name or tags: %+v", q.queued[2])
	}
}
