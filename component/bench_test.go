package component

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// BenchmarkFanout measures notifications per second from a hub publish to
// the subscribers' connections, through a real Prosody: 50 subscribers,
// 200 items per iteration, pipelined.
func BenchmarkFanout(b *testing.B) {
	const (
		accounts     = 10
		resources    = 5
		itemsPerIter = 200
	)
	p := testenv.StartProsody(b, testenv.ProsodyOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "pingd.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	h, err := hub.New(hub.Config{Stores: store.HubStores(st)})
	if err != nil {
		b.Fatal(err)
	}
	comp, err := New(Config{Hub: h, Store: st, Domain: p.ComponentDomain, Addr: p.ComponentAddr, Secret: p.Secret})
	if err != nil {
		b.Fatal(err)
	}
	h.Register(comp, hub.KindXMPP)
	done := make(chan struct{})
	go func() { defer close(done); _ = comp.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testenv.WaitFor(b, 20*time.Second, "the component to connect", comp.Connected)
	if _, _, err := h.CreateNode(ctx, hub.NodeSpec{Name: "bench", Config: hub.DefaultNodeConfig()}); err != nil {
		b.Fatal(err)
	}

	var received atomic.Int64
	for a := range accounts {
		user := fmt.Sprintf("sub%d", a)
		p.Register(user, password)
		for r := range resources {
			c := testenv.Dial(ctx, b, p, user, password, fmt.Sprintf("r%d", r))
			if _, err := c.SendRaw(ctx, fmt.Sprintf(`<iq type="set" to=%q id="s"><pubsub xmlns=%q><subscribe node="bench" jid=%q/></pubsub></iq>`,
				p.ComponentDomain, nsPubsub, c.JID.String())); err != nil {
				b.Fatal(err)
			}
			go func() {
				for {
					select {
					case <-ctx.Done():
						return
					case raw := <-c.Stanzas:
						if bytes.Contains(raw, []byte(nsPubsubEvent)) {
							received.Add(1)
						}
					}
				}
			}()
		}
	}
	subscribers := int64(accounts * resources)
	entries := make([]hub.Entry, itemsPerIter)

	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		before := received.Load()
		for j := range entries {
			id := fmt.Sprintf("i%d-%d", i, j)
			entries[j] = hub.Entry{ID: id, Title: id, Payload: atomEntry(id, "Item "+id)}
		}
		// One publish per item, as a feed with steady news would.
		for _, e := range entries {
			if _, err := h.Publish(ctx, "bench", "", []hub.Entry{e}); err != nil {
				b.Fatal(err)
			}
		}
		want := before + subscribers*itemsPerIter
		testenv.WaitFor(b, time.Minute, "every notification", func() bool { return received.Load() >= want })
	}
	b.StopTimer()
	elapsed := time.Since(start)
	b.ReportMetric(float64(received.Load())/elapsed.Seconds(), "notifications/s")
}
