package delivery

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// logReads counts the reads a delivery makes of a node and its log.
type logReads struct {
	Store
	nodes, events atomic.Int64
}

func (s *logReads) NodeByID(ctx context.Context, id int64) (*hub.Node, error) {
	s.nodes.Add(1)
	return s.Store.NodeByID(ctx, id)
}

func (s *logReads) EventsAfter(ctx context.Context, nodeID, after int64, limit int) ([]hub.Event, error) {
	s.events.Add(1)
	return s.Store.EventsAfter(ctx, nodeID, after, limit)
}

// TestFanOutReadsTheLogWithTheClaim: the node and the new events come with
// the claim of the node's subscriptions (one transaction), so a fan-out's
// deliveries read neither themselves: on SQLite those reads were two read
// transactions in a row before the first request. The subscribers get
// the item all the same.
func TestFanOutReadsTheLogWithTheClaim(t *testing.T) {
	reads := &logReads{}
	h := newHarness(t, func(c *Config) {
		reads.Store = c.Store
		c.Store = reads
		c.Now, c.PollInterval = time.Now, time.Hour
	})
	rc := newReceiver(t, h.clock)
	const n = 5
	for i := range n {
		h.subscribe(rc.URL(fmt.Sprintf("/s%d", i)), hub.SubActive, hub.Options{})
	}
	h.publish("a")
	testenv.WaitFor(t, 15*time.Second, "every subscriber's delivery", func() bool { return len(rc.deliveries("")) >= n })
	for _, d := range rc.deliveries("") {
		if ids := atomIDs(t, d.Body); len(ids) != 1 {
			t.Fatalf("%s got entries %v, want the one published", d.Path, ids)
		}
	}
	if nodes, events := reads.nodes.Load(), reads.events.Load(); nodes != 0 || events != 0 {
		t.Errorf("the deliveries read the node %d times and its log %d times, want neither: both come with the claim", nodes, events)
	}
}
