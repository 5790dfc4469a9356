package delivery

import (
	"context"
	"fmt"
	"sync"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/nodeurl"
)

// batch shares reads and renderings among the subscriptions claimed
// together: subscribers of one node usually stand at the same cursor, so
// the node, its events after that cursor and the rendered body are loaded
// and built once for all of them rather than once per subscriber.
type batch struct {
	store batchStore
	limit int
	// claimSeq is the engine's wake sequence when the batch was claimed
	// (see Engine.publishedSince).
	claimSeq uint64

	mu      sync.Mutex
	nodes   map[int64]*once
	events  map[eventsKey]*once
	renders map[string]*once
	links   map[string]*once
}

type eventsKey struct{ node, after int64 }

type rendered struct {
	body        []byte
	contentType string
}

// once computes a value the first time it is asked for, for every caller.
type once struct {
	do  sync.Once
	val any
	err error
}

func newBatch(store batchStore, limit int) *batch {
	return &batch{store: store, limit: limit,
		nodes: map[int64]*once{}, events: map[eventsKey]*once{}, renders: map[string]*once{}, links: map[string]*once{}}
}

func get[K comparable](b *batch, m map[K]*once, key K, f func() (any, error)) (any, error) {
	b.mu.Lock()
	o, ok := m[key]
	if !ok {
		o = &once{}
		m[key] = o
	}
	b.mu.Unlock()
	o.do.Do(func() { o.val, o.err = f() })
	if o.err != nil {
		// Do not keep failures: the next subscription tries again.
		b.mu.Lock()
		if m[key] == o {
			delete(m, key)
		}
		b.mu.Unlock()
	}
	return o.val, o.err
}

// prime gives the batch the node and its events after `after`, read
// with the claim.
func (b *batch) prime(node *hub.Node, after int64, events []hub.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	done := func(v any) *once {
		o := &once{val: v}
		o.do.Do(func() {})
		return o
	}
	b.nodes[node.ID] = done(node)
	b.events[eventsKey{node.ID, after}] = done(events)
}

func (b *batch) node(ctx context.Context, id int64) (*hub.Node, error) {
	v, err := get(b, b.nodes, id, func() (any, error) { return b.store.NodeByID(ctx, id) })
	if err != nil {
		return nil, err
	}
	n := *v.(*hub.Node)
	return &n, nil
}

func (b *batch) eventsAfter(ctx context.Context, node, after int64) ([]hub.Event, error) {
	v, err := get(b, b.events, eventsKey{node, after}, func() (any, error) {
		return b.store.EventsAfter(ctx, node, after, b.limit)
	})
	if err != nil {
		return nil, err
	}
	return v.([]hub.Event), nil
}

// render returns the body rendered under key, building it once.
func (b *batch) render(key string, f func() ([]byte, string, error)) ([]byte, string, error) {
	v, err := get(b, b.renders, key, func() (any, error) {
		body, ct, err := f()
		return rendered{body, ct}, err
	})
	if err != nil {
		return nil, "", err
	}
	r := v.(rendered)
	return r.body, r.contentType, nil
}

// Render builds the request body of a delivery once for every subscriber
// of the batch that gets the same events in the same variant (a format, a
// topic): senders name the variant, the engine adds the node and events.
// Without a batch (tests calling a sender directly) it just calls f.
func (d *Delivery) Render(variant string, f func() ([]byte, string, error)) ([]byte, string, error) {
	if d.batch == nil || len(d.Events) == 0 {
		return f()
	}
	key := fmt.Sprintf("%s\x00%d\x00%d\x00%d\x00%s", d.Sub.Kind, d.Node.ID, d.Events[0].Seq, d.Events[len(d.Events)-1].Seq, variant)
	return d.batch.render(key, f)
}

// Links returns the node's discovery links under publicURL, built once
// for every subscriber of the batch. Without a batch it just builds them.
func (d *Delivery) Links(publicURL string) (nodeurl.Links, error) {
	if d.batch == nil {
		return nodeurl.NodeLinks(publicURL, d.Node.Name)
	}
	v, err := get(d.batch, d.batch.links, publicURL+"\x00"+d.Node.Name, func() (any, error) {
		return nodeurl.NodeLinks(publicURL, d.Node.Name)
	})
	if err != nil {
		return nodeurl.Links{}, err
	}
	return v.(nodeurl.Links), nil
}
