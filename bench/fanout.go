package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// xmppServer is what the fan-out harness needs of a private XMPP server.
type xmppServer struct {
	Name          string // e.g. "Prosody"
	Domain        string
	C2SAddr       string
	ComponentAddr string
	Secret        string
	// PingdDomain is the component name pingd connects as (XEP-0033 off
	// where the server offers it, so this is pingd sending one stanza per
	// subscriber); PingdMulticastDomain that of a second pingd with
	// XEP-0033 on (its default), empty where the server has no multicast
	// service; PingdMulticastAllDomain that of a third, which sends every
	// subscriber's notification through the service (share 100). RawDomain
	// and RawMulticastDomain are those of the no-logic component.
	PingdDomain             string
	PingdMulticastDomain    string
	PingdMulticastAllDomain string
	RawDomain               string
	RawMulticastDomain      string
	// Native is the server's own pubsub service.
	Native string
	// Multicast is the server's XEP-0033 service, empty if none.
	Multicast string
	Register  func(user, password string) string
	// Pids lists the server's processes, for its CPU time.
	Pids func() []int
}

const (
	ownerUser     = "owner"
	benchPassword = "pw"
	rawDomain     = "raw.localhost"
	rawMCDomain   = "rawmc.localhost"
	pingdMCDomain = "pingdmc.localhost"
	pingdMCAll    = "pingdmcall.localhost"
)

func startProsodyServer(t testing.TB) *xmppServer {
	p := testenv.StartProsody(t, testenv.ProsodyOptions{
		Admins:          []string{ownerUser + "@localhost"},
		ExtraComponents: []string{rawDomain},
	})
	return &xmppServer{
		Name: "Prosody", Domain: p.Domain, C2SAddr: p.C2SAddr, ComponentAddr: p.ComponentAddr,
		Secret: p.Secret, PingdDomain: p.ComponentDomain, RawDomain: rawDomain,
		Native: p.RefPubsub, Register: p.Register,
		Pids: func() []int { return pidFromFile(filepath.Join(p.Dir, "prosody.pid")) },
	}
}

func startEjabberdServer(t testing.TB) *xmppServer {
	e := testenv.StartEjabberd(t, testenv.EjabberdOptions{
		Admins:          []string{ownerUser + "@localhost"},
		ExtraComponents: []string{rawDomain, rawMCDomain, pingdMCDomain, pingdMCAll},
		LogLevel:        "warning",
	})
	return &xmppServer{
		Name: "ejabberd", Domain: e.Domain, C2SAddr: e.C2SAddr, ComponentAddr: e.ComponentAddr,
		Secret: e.Secret, PingdDomain: e.ComponentDomain, RawDomain: rawDomain,
		RawMulticastDomain: rawMCDomain, PingdMulticastDomain: pingdMCDomain, PingdMulticastAllDomain: pingdMCAll, Native: e.RefPubsub, Multicast: e.Multicast,
		Register: e.Register, Pids: e.Pids,
	}
}

// fanoutTarget is one pubsub service measured: the server's own, the raw
// component (unicast or XEP-0033) or pingd (likewise).
type fanoutTarget struct {
	Name    string
	Service string
}

// fanoutSize is one subscriber count and the items published per round.
type fanoutSize struct{ N, M int }

type fanoutPlan struct {
	Sizes  []fanoutSize
	Rounds int
	// PerAccount is how many resources share an account (initial
	// presence is broadcast among them, so keep it modest).
	PerAccount int
	// ProfileDir, when set, gets a CPU profile of each pingd round at the
	// largest N.
	ProfileDir string
}

// roundResult is one target's round at one size.
type roundResult struct {
	Target   string
	Round    int
	N, M     int
	Expected int
	Received int
	Dups     int
	Errors   int
	Elapsed  time.Duration // first publish sent → last notification read
	Rate     float64       // notifications per second
	Lat      []time.Duration
	// ServerCPU and BenchCPU are the CPU time the XMPP server and this
	// process (the clients and the target's component, if any) used from
	// the first publish until the round ended.
	ServerCPU, BenchCPU time.Duration
}

// fanoutHarness holds the clients of one server across sizes and rounds.
type fanoutHarness struct {
	t       testing.TB
	srv     *xmppServer
	plan    fanoutPlan
	owner   *client
	clients []*client
	targets []fanoutTarget
}

func newFanoutHarness(ctx context.Context, t testing.TB, srv *xmppServer, plan fanoutPlan, targets []fanoutTarget) *fanoutHarness {
	t.Helper()
	if plan.PerAccount <= 0 {
		plan.PerAccount = 50
	}
	h := &fanoutHarness{t: t, srv: srv, plan: plan, targets: targets}
	maxN := 0
	for _, s := range plan.Sizes {
		maxN = max(maxN, s.N)
	}
	accounts := (maxN + plan.PerAccount - 1) / plan.PerAccount
	users := []string{ownerUser}
	for a := range accounts {
		users = append(users, fmt.Sprintf("sub%d", a))
	}
	// Registering calls t.Fatal on failure, so it stays on this goroutine.
	for _, u := range users {
		srv.Register(u, benchPassword)
	}
	owner, err := dialClient(ctx, srv.C2SAddr, srv.Domain, ownerUser, benchPassword, "owner")
	if err != nil {
		t.Fatal(err)
	}
	h.owner = owner
	t.Cleanup(h.close)
	return h
}

func (h *fanoutHarness) close() {
	for _, c := range h.clients {
		c.Close()
	}
	h.clients = nil
	if h.owner != nil {
		h.owner.Close()
		h.owner = nil
	}
}

// grow logs in subscribers until there are n, a few at a time.
func (h *fanoutHarness) grow(ctx context.Context, n int) {
	h.t.Helper()
	have := len(h.clients)
	if n <= have {
		return
	}
	fresh := make([]*client, n-have)
	err := parallel(n-have, 8, func(i int) error {
		idx := have + i
		var c *client
		var err error
		pprof.Do(ctx, pprof.Labels("side", "clients"), func(ctx context.Context) {
			c, err = dialClient(ctx, h.srv.C2SAddr, h.srv.Domain,
				fmt.Sprintf("sub%d", idx/h.plan.PerAccount), benchPassword, fmt.Sprintf("r%d", idx%h.plan.PerAccount))
		})
		fresh[i] = c
		return err
	})
	for _, c := range fresh {
		if c != nil {
			h.clients = append(h.clients, c)
		}
	}
	if err != nil {
		h.t.Fatalf("log in subscribers: %v", err)
	}
}

func createStanza(service, node string) func(string) string {
	return func(id string) string {
		return fmt.Sprintf(`<iq type='set' id='%s' to='%s'><pubsub xmlns='%s'><create node='%s'/></pubsub></iq>`, id, xmlEscape(service), nsPubsub, xmlEscape(node))
	}
}

func subscribeStanza(service, node, jid string) func(string) string {
	return func(id string) string {
		return fmt.Sprintf(`<iq type='set' id='%s' to='%s'><pubsub xmlns='%s'><subscribe node='%s' jid='%s'/></pubsub></iq>`, id, xmlEscape(service), nsPubsub, xmlEscape(node), xmlEscape(jid))
	}
}

// itemSummary pads entries to the size of a typical feed entry.
var itemSummary = strings.Repeat("A change notification benchmark entry. ", 6)

func publishStanza(service, node, itemID string) func(string) string {
	return func(id string) string {
		return fmt.Sprintf(`<iq type='set' id='%s' to='%s'><pubsub xmlns='%s'><publish node='%s'><item id='%s'>`+
			`<entry xmlns='http://www.w3.org/2005/Atom'><id>urn:bench:%s</id><title>Item %s</title>`+
			`<link href='http://bench.example/%s'/><updated>2026-01-01T00:00:00Z</updated><summary>%s</summary></entry>`+
			`</item></publish></pubsub></iq>`,
			id, xmlEscape(service), nsPubsub, xmlEscape(node), itemID, itemID, itemID, itemID, itemSummary)
	}
}

// prepare creates the size's node on every target and subscribes the
// first n clients to each.
func (h *fanoutHarness) prepare(ctx context.Context, node string, n int) {
	h.t.Helper()
	h.grow(ctx, n)
	for _, tg := range h.targets {
		if _, err := h.owner.iq(ctx, createStanza(tg.Service, node)); err != nil {
			h.t.Fatalf("create %s on %s: %v", node, tg.Name, err)
		}
		err := parallel(n, 16, func(i int) error {
			c := h.clients[i]
			_, err := c.iq(ctx, subscribeStanza(tg.Service, node, c.jid))
			return err
		})
		if err != nil {
			h.t.Fatalf("subscribe to %s on %s: %v", node, tg.Name, err)
		}
	}
}

// roundState collects one round's notifications.
type roundState struct {
	prefix   string
	m        int
	base     time.Time
	recv     []int64 // [client*m+item] nanoseconds after base, 0: not yet
	count    atomic.Int64
	dups     atomic.Int64
	stray    atomic.Int64
	expected int64
	done     chan struct{}
}

func (st *roundState) onMessage(clientIdx int, elem []byte, at time.Time) {
	item := child(elem, "item")
	if item == nil {
		st.stray.Add(1)
		return
	}
	id, _ := attr(item, "id")
	rest, ok := strings.CutPrefix(id, st.prefix)
	if !ok {
		st.stray.Add(1)
		return
	}
	k, err := strconv.Atoi(rest)
	if err != nil || k < 0 || k >= st.m {
		st.stray.Add(1)
		return
	}
	d := max(int64(at.Sub(st.base)), 1)
	if !atomic.CompareAndSwapInt64(&st.recv[clientIdx*st.m+k], 0, d) {
		st.dups.Add(1)
		return
	}
	if st.count.Add(1) == st.expected {
		close(st.done)
	}
}

// stallTimeout ends a round that stopped making progress.
const stallTimeout = 15 * time.Second

// round publishes m items pipelined to the target's node and waits until
// every subscriber got every item (or progress stalls).
func (h *fanoutHarness) round(ctx context.Context, tg fanoutTarget, node string, n, m, roundNo int) roundResult {
	h.t.Helper()
	tag := fmt.Sprintf("%s-%d-%d-", strings.ReplaceAll(tg.Name, " ", "_"), n, roundNo)
	st := &roundState{prefix: tag, m: m, recv: make([]int64, n*m), expected: int64(n * m), done: make(chan struct{})}
	for i, c := range h.clients[:n] {
		fn := func(elem []byte, at time.Time) { st.onMessage(i, elem, at) }
		c.onMessage.Store(&fn)
	}
	defer func() {
		for _, c := range h.clients[:n] {
			c.onMessage.Store(nil)
		}
	}()
	errsBefore := int64(0)
	for _, c := range h.clients[:n] {
		errsBefore += c.errs.Load()
	}

	pub := make([]int64, m)
	acks := make([]<-chan []byte, m)
	serverCPU, benchCPU := processCPU(h.srv.Pids()), selfCPU()
	st.base = time.Now()
	for k := range m {
		pub[k] = int64(time.Since(st.base))
		ch, err := h.owner.sendIQ(publishStanza(tg.Service, node, tag+strconv.Itoa(k)))
		if err != nil {
			h.t.Fatalf("publish to %s: %v", tg.Name, err)
		}
		acks[k] = ch
	}
	res := roundResult{Target: tg.Name, Round: roundNo, N: n, M: m, Expected: n * m}
	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	for _, ch := range acks {
		if _, err := awaitIQ(actx, ch); err != nil {
			res.Errors++
			if res.Errors == 1 {
				h.t.Logf("%s: publish failed: %v", tg.Name, err)
			}
		}
	}
	cancel()

	last, lastChange := st.count.Load(), time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
wait:
	for {
		select {
		case <-st.done:
			break wait
		case <-ctx.Done():
			break wait
		case <-tick.C:
			if c := st.count.Load(); c != last {
				last, lastChange = c, time.Now()
			} else if time.Since(lastChange) > stallTimeout {
				break wait
			}
		}
	}
	tick.Stop()
	res.ServerCPU, res.BenchCPU = processCPU(h.srv.Pids())-serverCPU, selfCPU()-benchCPU

	var lastRecv int64
	res.Lat = make([]time.Duration, 0, n*m)
	for i := range n {
		for k := range m {
			d := atomic.LoadInt64(&st.recv[i*m+k])
			if d == 0 {
				continue
			}
			res.Received++
			lastRecv = max(lastRecv, d)
			res.Lat = append(res.Lat, time.Duration(d-pub[k]))
		}
	}
	res.Dups = int(st.dups.Load())
	for _, c := range h.clients[:n] {
		res.Errors += int(c.errs.Load())
	}
	res.Errors -= int(errsBefore)
	res.Elapsed = time.Duration(lastRecv)
	if res.Elapsed > 0 {
		res.Rate = float64(res.Received) / res.Elapsed.Seconds()
	}
	if res.Received < res.Expected {
		h.t.Logf("%s N=%d round %d: %d of %d notifications arrived (stray %d, errors %d)",
			tg.Name, n, roundNo, res.Received, res.Expected, st.stray.Load(), res.Errors)
		for _, c := range h.clients[:n] {
			if p := c.lastErr.Load(); p != nil {
				h.t.Logf("last error stanza: %.400s", *p)
				break
			}
		}
		for _, c := range h.clients[:n] {
			select {
			case <-c.done:
				h.t.Logf("the stream of %s ended: %v", c.jid, c.readErr)
			default:
				continue
			}
			break
		}
	}
	return res
}

// run measures every size: prepare, one warm-up round per target, then
// plan.Rounds rounds in which the targets take turns, the order rotating
// so none always goes first.
func (h *fanoutHarness) run(ctx context.Context) []roundResult {
	h.t.Helper()
	var results []roundResult
	for _, size := range h.plan.Sizes {
		node := fmt.Sprintf("fanout-%d", size.N)
		h.prepare(ctx, node, size.N)
		for _, tg := range h.targets {
			h.round(ctx, tg, node, size.N, min(size.M, 10), -1)
			time.Sleep(200 * time.Millisecond)
		}
		for r := range h.plan.Rounds {
			order := slices.Clone(h.targets)
			k := r % len(order)
			order = append(order[k:], order[:k]...)
			for _, tg := range order {
				h.waitServerIdle(ctx)
				stop := h.maybeProfile(tg, size.N, r)
				res := h.round(ctx, tg, node, size.N, size.M, r)
				stop()
				results = append(results, res)
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	return results
}

// Quiet machine: a round starts once the XMPP server and this process
// (the clients, pingd, the raw components) have each used at most idleCPU
// of CPU over idleWindow, or after idleMaxWait. ejabberd keeps
// working for a while after a heavy round (garbage collection, mod_pubsub's
// tables), and a round started into that measured the previous target's
// after-work as much as its own target.
const (
	idleWindow  = 100 * time.Millisecond
	idleCPU     = 10 * time.Millisecond // one clock tick of /proc: 10 % of a core
	idleMaxWait = 5 * time.Second
)

// waitServerIdle waits until the server and this process are quiet (see
// idleWindow).
func (h *fanoutHarness) waitServerIdle(ctx context.Context) {
	deadline := time.Now().Add(idleMaxWait)
	lastServer, lastSelf := processCPU(h.srv.Pids()), selfCPU()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(idleWindow):
		}
		server, self := processCPU(h.srv.Pids()), selfCPU()
		if server-lastServer <= idleCPU && self-lastSelf <= idleCPU {
			return
		}
		lastServer, lastSelf = server, self
	}
	h.t.Logf("%s still busy after %s; starting the round anyway", h.srv.Name, idleMaxWait)
}

// maybeProfile starts a CPU profile of a pingd round.
func (h *fanoutHarness) maybeProfile(tg fanoutTarget, n, r int) func() {
	if !strings.HasPrefix(tg.Name, "pingd") {
		return func() {}
	}
	name := "pingd"
	switch {
	case strings.HasSuffix(tg.Name, "all through it"):
		name = "pingdmcall" // pingd with XEP-0033, share 100
	case tg.Name != "pingd":
		name = "pingdmc" // pingd with XEP-0033
	}
	return startProfile(h.t, h.plan.ProfileDir, fmt.Sprintf("fanout-%s-%s-N%d-round%d", strings.ToLower(h.srv.Name), name, n, r))
}

// startProfile writes a CPU profile to dir/name.cpu.pprof until the
// returned function is called; with no dir it does nothing.
func startProfile(t testing.TB, dir, name string) func() {
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, name+".cpu.pprof"))
	if err != nil {
		t.Logf("profile: %v", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		t.Logf("profile: %v", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// parallel runs fn(0..n-1) with at most workers at a time and returns the
// first error.
func parallel(n, workers int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  atomic.Int64
	)
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}

// fanoutSummary is one target at one size over every round.
type fanoutSummary struct {
	Target             string
	N, M               int
	Rates              []float64
	Median             float64
	P50, P99           time.Duration
	Received, Expected int
	Errors, Dups       int
	// ServerCPU and BenchCPU are CPU time per notification, over every
	// round.
	ServerCPU, BenchCPU time.Duration
	// ServerBusy is the server's CPU time over the rounds' elapsed time
	// (1.0: one core busy all along).
	ServerBusy float64
}

func summarizeFanout(results []roundResult, targets []fanoutTarget, sizes []fanoutSize) []fanoutSummary {
	var out []fanoutSummary
	for _, size := range sizes {
		for _, tg := range targets {
			s := fanoutSummary{Target: tg.Name, N: size.N, M: size.M}
			var lat []time.Duration
			var server, bench, elapsed time.Duration
			for _, r := range results {
				if r.Target != tg.Name || r.N != size.N {
					continue
				}
				server += r.ServerCPU
				bench += r.BenchCPU
				elapsed += r.Elapsed
				s.Rates = append(s.Rates, r.Rate)
				lat = append(lat, r.Lat...)
				s.Received += r.Received
				s.Expected += r.Expected
				s.Errors += r.Errors
				s.Dups += r.Dups
			}
			s.Median = median(s.Rates)
			if s.Received > 0 {
				s.ServerCPU = server / time.Duration(s.Received)
				s.BenchCPU = bench / time.Duration(s.Received)
			}
			if elapsed > 0 {
				s.ServerBusy = server.Seconds() / elapsed.Seconds()
			}
			s.P50, s.P99 = percentile(lat, 50), percentile(lat, 99)
			out = append(out, s)
		}
	}
	return out
}

// fanoutTable renders the summaries with ratios against the raw unicast
// component and the server's own pubsub at the same size.
func fanoutTable(sums []fanoutSummary, rawName, nativeName string) *table {
	t := &table{header: []string{"N", "items", "target", "notifications/s (median)", "min–max", "p50", "p99", "delivered",
		"server CPU per notification (busy)", "bench process CPU per notification", "vs raw", "vs " + nativeName}}
	find := func(name string, n int) float64 {
		for _, s := range sums {
			if s.Target == name && s.N == n {
				return s.Median
			}
		}
		return 0
	}
	for _, s := range sums {
		var lo, hi float64
		if len(s.Rates) > 0 {
			lo, hi = slices.Min(s.Rates), slices.Max(s.Rates)
		}
		delivered := fmt.Sprintf("%d/%d", s.Received, s.Expected)
		if s.Errors > 0 || s.Dups > 0 {
			delivered += fmt.Sprintf(" (%d errors, %d dups)", s.Errors, s.Dups)
		}
		t.add(fmt.Sprint(s.N), fmt.Sprint(s.M), s.Target, perSec(s.Median), perSec(lo)+"–"+perSec(hi),
			ms(s.P50), ms(s.P99), delivered,
			fmt.Sprintf("%s (%.0f%%)", us(s.ServerCPU), 100*s.ServerBusy), us(s.BenchCPU),
			ratio(s.Median, find(rawName, s.N)), ratio(s.Median, find(nativeName, s.N)))
	}
	return t
}
