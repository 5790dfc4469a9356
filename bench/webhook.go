package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/getpingd"
	"github.com/pingd/pingd/internal/netguard"
)

// sink is a loopback webhook receiver that counts what it is sent. It
// listens on several ports, each a receiver host of its own to pingd.
type sink struct {
	URLs []string

	mu       sync.Mutex
	perPath  map[string]int
	sample   []byte
	sampleCT string
	sampleLk string

	count  atomic.Int64
	target atomic.Int64
	done   atomic.Pointer[chan struct{}]
}

func startSink(t testing.TB, hosts int) *sink {
	t.Helper()
	s := &sink{perPath: map[string]int{}}
	for range hosts {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s.URLs = append(s.URLs, "http://"+ln.Addr().String())
		srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("sink: %v", err)
			}
		}()
		t.Cleanup(func() { _ = srv.Close() })
	}
	return s
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.perPath[r.URL.Path]++
	if s.sample == nil {
		s.sample, s.sampleCT, s.sampleLk = body, r.Header.Get("Content-Type"), r.Header.Get("Link")
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	if s.count.Add(1) == s.target.Load() {
		if ch := s.done.Load(); ch != nil {
			close(*ch)
		}
	}
}

// expect resets the counters and returns a channel closed when n requests
// have arrived.
func (s *sink) expect(n int) <-chan struct{} {
	ch := make(chan struct{})
	s.mu.Lock()
	clear(s.perPath)
	s.mu.Unlock()
	s.count.Store(0)
	s.target.Store(int64(n))
	s.done.Store(&ch)
	return ch
}

// dups counts paths that got more than one request since expect.
func (s *sink) dups() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.perPath {
		n += c - 1
	}
	return n
}

// webhookSize is one subscriber count spread over a number of receiver
// hosts.
type webhookSize struct{ N, Hosts int }

type webhookPlan struct {
	Sizes  []webhookSize
	Rounds int
	// ProfileDir, when set, gets CPU profiles of pingd's rounds.
	ProfileDir string
}

type webhookRound struct {
	N, Hosts   int
	Conc       int // concurrency of the raw client
	Pingd, Raw time.Duration
	// PingdCPU and RawCPU are the CPU time this process (pingd or the
	// plain client, with the sink) used for each side's round and the
	// settleTime after it (pingd saves its last states then).
	PingdCPU, RawCPU time.Duration
	PingdMissing     int
	Dups             int
	PublishCalls     map[string]int64 // store calls made by hub.Publish
	RoundCalls       map[string]int64 // the other store calls of the round: the deliveries
}

// The delivery engine's limits, set to its defaults explicitly so the
// raw client can use the same concurrency: at most engineWorkers requests
// at once, and enginePerHost to one receiver host.
const (
	engineWorkers = 32
	enginePerHost = 4
)

// measureWebhooks runs measurement 3: for each size, N webhook
// subscriptions to one node spread over the sink's hosts, one published
// item, and the time until the sink has every delivery; alternating with
// a plain net/http client that sends the same request to the same N URLs
// with the concurrency the engine may use for them.
func measureWebhooks(ctx context.Context, t testing.TB, plan webhookPlan) []webhookRound {
	t.Helper()
	maxHosts := 1
	for _, s := range plan.Sizes {
		maxHosts = max(maxHosts, s.Hosts)
	}
	snk := startSink(t, maxHosts)
	p := startPingd(t, pingdOptions{
		HTTP:     true,
		Delivery: true,
		DeliveryConfig: delivery.Config{
			Workers: engineWorkers,
			PerHost: enginePerHost,
			Senders: map[hub.Kind]delivery.Sender{
				hub.KindWebhook: &delivery.Webhook{HTTPSender: delivery.HTTPSender{
					Client:    netguard.NewClient(netguard.Options{AllowPrivate: true, MaxIdleConnsPerHost: enginePerHost}),
					PublicURL: "http://localhost", UserAgent: "pingd-bench",
				}},
			},
		},
	})
	raw := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: enginePerHost, IdleConnTimeout: 90 * time.Second},
	}
	var out []webhookRound
	for _, size := range plan.Sizes {
		n, hosts := size.N, max(size.Hosts, 1)
		conc := min(engineWorkers, hosts*enginePerHost)
		node := fmt.Sprintf("hooks-%d-%d", n, hosts)
		if _, _, err := p.Hub.CreateNode(ctx, hub.NodeSpec{Name: node, Config: hub.DefaultNodeConfig()}); err != nil {
			t.Fatal(err)
		}
		urls := make([]string, n)
		for i := range n {
			urls[i] = fmt.Sprintf("%s/hook/%d/%d/%d", snk.URLs[i%hosts], n, hosts, i)
		}
		err := parallel(n, 4, func(i int) error {
			_, _, err := p.Hub.Subscribe(ctx, hub.Subscription{
				NodeName: node, Kind: hub.KindWebhook, Address: urls[i],
				Options: hub.Options{Method: getpingd.WebhookMethodPost, Diff: getpingd.DiffNone},
			})
			return err
		})
		if err != nil {
			t.Fatalf("subscribe %d webhooks: %v", n, err)
		}
		// Warm-up, and the request the raw client replays.
		pingdRound(ctx, t, p, snk, node, n, -1)
		snk.mu.Lock()
		body, ct, link := snk.sample, snk.sampleCT, snk.sampleLk
		snk.mu.Unlock()
		for r := range roundsFor(plan.Rounds, n) {
			res := webhookRound{N: n, Hosts: hosts, Conc: conc}
			doRaw := func() { res.Raw, res.RawCPU = rawRound(ctx, t, raw, snk, urls, body, ct, link, conc) }
			doPingd := func() {
				defer startProfile(t, plan.ProfileDir, fmt.Sprintf("webhooks-N%d-hosts%d-round%d", n, hosts, r))()
				res.Pingd, res.PingdCPU, res.PingdMissing, res.PublishCalls, res.RoundCalls = pingdRound(ctx, t, p, snk, node, n, r)
				res.Dups = snk.dups()
			}
			if r%2 == 0 {
				doPingd()
				doRaw()
			} else {
				doRaw()
				doPingd()
			}
			out = append(out, res)
		}
	}
	return out
}

// roundsFor gives small sizes more rounds: a round of 10 or 100
// deliveries takes milliseconds, and the median of three such rounds
// moves with every hiccup of a shared machine (at N=100 one side's
// rounds spread from 4 to 20 ms in one run).
func roundsFor(rounds, n int) int {
	return rounds * max(1, min(15, 3000/n))
}

// settleTime is how long a round waits after the last delivery arrived
// for pingd's last delivery states to be saved.
const settleTime = 200 * time.Millisecond

// pingdRound publishes one item and waits until every subscriber has it.
func pingdRound(ctx context.Context, t testing.TB, p *pingdSide, snk *sink, node string, n, r int) (elapsed, cpu time.Duration, missing int, publishCalls, deliveries map[string]int64) {
	t.Helper()
	done := snk.expect(n)
	before := p.Store.Snapshot()
	id := fmt.Sprintf("%s-r%d", node, r)
	entry := fmt.Sprintf(`<entry xmlns="http://www.w3.org/2005/Atom"><id>urn:bench:%s</id><title>Item %s</title><link href="http://bench.example/%s"/><updated>%s</updated><summary>%s</summary></entry>`,
		id, id, id, time.Now().UTC().Format(time.RFC3339), itemSummary)
	p.Store.TakeTagged("publish")
	cpuBefore, start := selfCPU(), time.Now()
	if _, err := p.Hub.Publish(withCountTag(ctx, "publish"), node, "bench", []hub.Entry{{ID: id, Payload: []byte(entry), Title: "Item " + id, Link: "http://bench.example/" + id, Updated: time.Now()}}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if !waitProgress(ctx, done, &snk.count, time.Minute) {
		missing = n - int(snk.count.Load())
		t.Logf("pingd webhooks N=%d: %d of %d deliveries arrived", n, snk.count.Load(), n)
	}
	elapsed = time.Since(start)
	// Deliveries save their state after the receiver answered; let the
	// last ones land before counting them and the CPU.
	time.Sleep(settleTime)
	cpu = selfCPU() - cpuBefore
	// The deliveries' calls: everything after the publish started but the
	// publish's own.
	publishCalls = p.Store.TakeTagged("publish")
	deliveries = diffCounts(before, p.Store.Snapshot())
	for m, c := range publishCalls {
		if deliveries[m] -= c; deliveries[m] == 0 {
			delete(deliveries, m)
		}
	}
	return elapsed, cpu, missing, publishCalls, deliveries
}

// rawRound sends the same request to every URL with conc workers.
func rawRound(ctx context.Context, t testing.TB, client *http.Client, snk *sink, urls []string, body []byte, ct, link string, conc int) (elapsed, cpu time.Duration) {
	t.Helper()
	done := snk.expect(len(urls))
	cpuBefore, start := selfCPU(), time.Now()
	err := parallel(len(urls), conc, func(i int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, urls[i], bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Link", link)
		req.Header.Set("User-Agent", "pingd-bench")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil
	})
	if err != nil {
		t.Fatalf("raw webhook round: %v", err)
	}
	waitProgress(ctx, done, &snk.count, 30*time.Second)
	elapsed = time.Since(start)
	// As long as pingd's round settles, so that both CPU figures include
	// the same idle time of the process.
	time.Sleep(settleTime)
	return elapsed, selfCPU() - cpuBefore
}

// waitProgress waits for done while the counter keeps moving; false when
// it stalled for stall.
func waitProgress(ctx context.Context, done <-chan struct{}, counter *atomic.Int64, stall time.Duration) bool {
	last, since := counter.Load(), time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return true
		case <-ctx.Done():
			return false
		case <-tick.C:
			if c := counter.Load(); c != last {
				last, since = c, time.Now()
			} else if time.Since(since) > stall {
				return false
			}
		}
	}
}

func webhookTable(rounds []webhookRound, sizes []webhookSize) *table {
	t := &table{header: []string{"N", "receiver hosts", "pingd deliveries/s (median)", "plain net/http (median)", "pingd ÷ net/http", "process CPU per delivery: pingd / net/http", "missing / dups", "store writes in hub.Publish", "store writes per delivery"}}
	for _, size := range sizes {
		n := size.N
		conc := 0
		var pr, rr, pc, rc []float64
		var missing, dups int
		var pub, round map[string]int64
		for _, r := range rounds {
			if r.N != n || r.Hosts != max(size.Hosts, 1) {
				continue
			}
			conc = r.Conc
			pr = append(pr, float64(n)/r.Pingd.Seconds())
			rr = append(rr, float64(n)/r.Raw.Seconds())
			pc = append(pc, float64(r.PingdCPU)/float64(n))
			rc = append(rc, float64(r.RawCPU)/float64(n))
			missing += r.PingdMissing
			dups += r.Dups
			pub, round = r.PublishCalls, r.RoundCalls
		}
		t.add(fmt.Sprint(n), fmt.Sprint(max(size.Hosts, 1)), perSec(median(pr)), fmt.Sprintf("%s (%d at once)", perSec(median(rr)), conc), ratio(median(pr), median(rr)),
			fmt.Sprintf("%s / %s", us(time.Duration(median(pc))), us(time.Duration(median(rc)))), fmt.Sprintf("%d / %d", missing, dups), describeWrites(pub, 1), describeWrites(round, n))
	}
	return t
}

// describeWrites lists the write calls of a diff, divided by per.
func describeWrites(d map[string]int64, per int) string {
	var parts []string
	for _, m := range sortedKeys(d) {
		isWrite := false
		for _, w := range writeMethods {
			isWrite = isWrite || w == m
		}
		if !isWrite {
			continue
		}
		if per == 1 {
			parts = append(parts, fmt.Sprintf("%s %d", m, d[m]))
		} else {
			parts = append(parts, fmt.Sprintf("%s %.2f", m, float64(d[m])/float64(per)))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
