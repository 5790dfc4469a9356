package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/hub/fetching"
)

// pollSize is one number of followed sources spread over origin hosts.
type pollSize struct{ N, Hosts int }

type pollPlan struct {
	Sizes  []pollSize
	Rounds int
	// ChangeShare is the share of polls that find their feed changed.
	ChangeShare float64
	// RoundCap bounds one side's saturation round: a side that has not
	// polled every source by then is measured on what it polled.
	RoundCap time.Duration
	// LatenessWindow is how long due times are spread for the lateness
	// runs (the first part of a longer polling interval).
	LatenessWindow time.Duration
	// Hourly adds a lateness run at the rate of N sources polled hourly
	// where that is at least one a second.
	Hourly bool
	// LatenessAt adds lateness runs at fixed rates (at sizes with enough
	// sources to fill the window): a larger N's hourly rate, measured on a
	// smaller database when the larger one is not run.
	LatenessAt []latenessRate
	// WokenSources is how many sources the diagnostic rounds make due, in
	// which pingd's fetch loop is woken every few milliseconds (0: none).
	WokenSources int
	// BaselineBudget skips a size whose baselines, at the rate pingd took
	// the previous size's, would take longer (0: no bound).
	BaselineBudget time.Duration
	// ProfileDir, when set, gets CPU profiles of pingd's rounds and, to
	// set beside them, of the plain fetcher's (polling-plain-…).
	ProfileDir string
	// NoBinary leaves out the round of pingd serve in its own process.
	NoBinary bool
}

// The fetch limits both sides work with: cmd/pingd's defaults
// (--fetch-workers, --fetches-per-host, --fetch-host-spacing).
const (
	pollWorkers = fetching.DefaultFetchWorkers
	pollPerHost = fetching.DefaultFetchesPerHost
	pollSpacing = fetching.DefaultFetchHostSpacing
)

// latenessRate is a rate of due sources a second and what it stands for.
type latenessRate struct {
	Rate  float64
	Label string
	// Interval is the polling interval the rate serves for the N it
	// stands for.
	Interval time.Duration
}

// pollRound is one side's saturation round: every source due at once.
type pollRound struct {
	Side int
	// Woken marks pingd's diagnostic rounds: WokenSources due, the fetch
	// loop woken every few milliseconds as a stream of pings would.
	Woken    bool
	Due      int   // sources due at the start
	Polls    int64 // polls finished (pingd: fetch outcomes stored)
	Elapsed  time.Duration
	CPU      time.Duration // this process's CPU (the side and the origins)
	Requests int64         // requests the origins saw
	Changed  int64         // of which found the feed changed
	Writes   map[string]int64
	// DiskBytes is what the process sent to the storage layer (Linux
	// /proc/self/io write_bytes): SQLite's WAL and checkpoints.
	DiskBytes int64
}

// latenessRun is one side polling sources due evenly at Rate a second.
type latenessRun struct {
	Side      int
	Label     string
	Rate      float64       // sources due per second
	Interval  time.Duration // N ÷ Rate: the polling interval this rate serves
	Window    time.Duration // how long due times were spread
	Scheduled int
	Unpolled  int
	Late      []time.Duration // request arrival − due time, per scheduled source
}

type pollResult struct {
	Size pollSize
	// Skipped says why the size was not measured ("" when it was).
	Skipped            string
	Populate, Baseline time.Duration
	Rounds             []pollRound
	DBBytes, WALBytes  int64
	// DBObjects are the tables' and indexes' shares of DBBytes.
	DBObjects            []dbObjectBytes
	PeakRSS              [2]int64
	FarmRSS              int64 // resident memory with the origin farm up, before pingd starts
	PeakHWM              int64
	Lateness             []latenessRun
	BodyBytes            int64 // size of one feed document
	ProfileNames         []string
	PingdWritesMethodSum map[string]int64
	// Binary is pingd serve's own round, after the others.
	Binary binaryPoll
}

// measurePolling runs the polling measurement at each size: a fresh
// origin farm and database, N nodes each following its own feed, their
// baselines fetched (not measured), then rounds in which every source is
// due at once, pingd and the plain fetcher alternating, and last the
// lateness runs.
func measurePolling(ctx context.Context, t testing.TB, plan pollPlan) []pollResult {
	t.Helper()
	var out []pollResult
	baselineRate := 0.0
	bin := ""
	if !plan.NoBinary {
		bin = buildPingd(t)
	}
	for _, size := range plan.Sizes {
		if plan.BaselineBudget > 0 && baselineRate > 0 {
			if d := time.Duration(float64(size.N) / baselineRate * float64(time.Second)); d > plan.BaselineBudget {
				out = append(out, pollResult{Size: size, Skipped: fmt.Sprintf("not run: its baselines at %s (the rate of the size before) would take %v, over the %v allowed",
					perSec(baselineRate), d.Round(time.Second), plan.BaselineBudget)})
				continue
			}
		}
		res := measurePollingSize(ctx, t, plan, size, bin)
		baselineRate = float64(size.N) / res.Baseline.Seconds()
		out = append(out, res)
	}
	return out
}

func measurePollingSize(ctx context.Context, t testing.TB, plan pollPlan, size pollSize, bin string) pollResult {
	t.Helper()
	res := pollResult{Size: size, BodyBytes: int64(len(originDocument(0, originEntries-1)))}
	farm := startOriginFarm(t, size.Hosts, size.N, plan.ChangeShare)
	defer farm.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "pingd.db")

	// The nodes, written through a hub without a fetch loop: creating a
	// node then schedules its source's baseline without waiting for it.
	start := time.Now()
	maker := startPingd(t, pingdOptions{DB: db})
	sourceIDs := make([]int64, size.N)
	err := parallel(size.N, 4, func(i int) error {
		n, _, err := maker.Hub.CreateNode(ctx, hub.NodeSpec{Name: "poll-" + strconv.Itoa(i), Source: farm.FeedURL(i), Config: hub.DefaultNodeConfig()})
		if err != nil {
			return err
		}
		sourceIDs[i] = n.SourceID
		return nil
	})
	maker.Stop()
	if err != nil {
		t.Fatalf("create %d nodes: %v", size.N, err)
	}
	res.Populate = time.Since(start)

	// pingd with its fetch loop takes the baselines (every source is due
	// as new), the plain fetcher its first full GETs.
	if m, err := readMemory(os.Getpid()); err == nil {
		res.FarmRSS = m.RSS
	}
	mem := startMemorySampler(ctx)
	defer mem.stop()
	start = time.Now()
	p := startPingd(t, pingdOptions{DB: db, Fetch: true, FetchWorkers: pollWorkers, FetchesPerHost: pollPerHost, FetchHostSpacing: pollSpacing})
	defer p.Stop()
	if !drainDue(ctx, p, int64(size.N)) {
		t.Fatalf("pingd baselined %d of %d sources", p.Store.fetchesStored.Load(), size.N)
	}
	res.Baseline = time.Since(start)
	plain := newPlainFetcher(farm, pollWorkers, pollPerHost, pollSpacing)
	plain.pollAll(ctx, allFeeds(size.N))
	plain.client.CloseIdleConnections()

	woken := sourceIDs
	if plan.WokenSources > 0 && plan.WokenSources < size.N {
		woken = nil
		for j := range plan.WokenSources {
			woken = append(woken, sourceIDs[j*size.N/plan.WokenSources])
		}
	}
	for r := range plan.Rounds {
		sides := []func(){
			func() {
				name := fmt.Sprintf("polling-N%d-round%d", size.N, r)
				res.Rounds = append(res.Rounds, pingdPollRound(ctx, t, p, farm, sourceIDs, false, plan, mem, name))
			},
			func() {
				// Profiled too, to set pingd's profile beside.
				stop := startProfile(t, plan.ProfileDir, fmt.Sprintf("polling-plain-N%d-round%d", size.N, r))
				res.Rounds = append(res.Rounds, plainPollRound(ctx, plain, farm, size.N, mem))
				stop()
			},
		}
		if plan.WokenSources > 0 {
			sides = append(sides, func() {
				name := fmt.Sprintf("polling-woken-N%d-round%d", size.N, r)
				res.Rounds = append(res.Rounds, pingdPollRound(ctx, t, p, farm, woken, true, plan, mem, name))
			})
		}
		// The order rotates, so no side always runs first. Each round
		// starts with the spacing of every host behind it: a side whose
		// previous round had just ended would otherwise wait for the
		// spacing of each host before its first request.
		for k := range sides {
			time.Sleep(pollSpacing)
			sides[(k+r)%len(sides)]()
		}
	}

	// A round cut off at its cap left sources due: poll them before the
	// lateness runs, or they would be claimed ahead of those runs' sources.
	drainDue(ctx, p, -1)

	var pingdRates []float64
	for _, x := range res.Rounds {
		if x.Side == sidePingd && !x.Woken && x.Elapsed > 0 {
			pingdRates = append(pingdRates, float64(x.Polls)/x.Elapsed.Seconds())
		}
	}
	if rate := median(pingdRates) / 2; rate > 0 && plan.LatenessWindow > 0 {
		label := "half of pingd's saturation rate"
		res.Lateness = append(res.Lateness,
			pingdLateness(ctx, t, p, farm, sourceIDs, rate, plan.LatenessWindow, label, mem),
			plainLateness(ctx, plain, farm, size.N, rate, plan.LatenessWindow, label, mem))
	}
	if rate := float64(size.N) / time.Hour.Seconds(); plan.Hourly && plan.LatenessWindow > 0 && rate >= 1 {
		label := "N polled hourly"
		res.Lateness = append(res.Lateness,
			pingdLateness(ctx, t, p, farm, sourceIDs, rate, plan.LatenessWindow, label, mem),
			plainLateness(ctx, plain, farm, size.N, rate, plan.LatenessWindow, label, mem))
	}
	for _, at := range plan.LatenessAt {
		if at.Rate*plan.LatenessWindow.Seconds() > float64(size.N) || plan.LatenessWindow <= 0 {
			continue
		}
		for _, run := range []latenessRun{
			pingdLateness(ctx, t, p, farm, sourceIDs, at.Rate, plan.LatenessWindow, at.Label, mem),
			plainLateness(ctx, plain, farm, size.N, at.Rate, plan.LatenessWindow, at.Label, mem),
		} {
			run.Interval = at.Interval
			res.Lateness = append(res.Lateness, run)
		}
	}
	mem.stop()
	res.PeakRSS = mem.peaks()
	if m, err := readMemory(os.Getpid()); err == nil {
		res.PeakHWM = m.Peak
	}
	// What the lateness runs left due is polled before pingd stops, so no
	// fetch of it is under way when the binary's round makes it due.
	drainDue(ctx, p, -1)
	p.Stop()
	res.DBBytes, res.WALBytes = fileSize(db), fileSize(db+"-wal")
	if res.DBObjects, err = sqliteObjectBytes(ctx, db); err != nil {
		t.Logf("database per table: %v", err)
	}
	if bin != "" {
		res.Binary = measureBinaryPoll(ctx, t, bin, db, farm, sourceIDs, plan.RoundCap+time.Duration(size.N)*2*time.Millisecond)
	}
	return res
}

func allFeeds(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// sourceScheduler is the store method the rounds make sources due with.
type sourceScheduler interface {
	ScheduleSource(ctx context.Context, id int64, at time.Time, reason string) error
}

// scheduleSources makes the sources due at their times through the store,
// as a poll schedule reaching them would (not a ping: none is recorded).
func scheduleSources(ctx context.Context, t testing.TB, st sourceScheduler, ids []int64, at func(i int) time.Time) {
	t.Helper()
	err := parallel(len(ids), 4, func(i int) error {
		return st.ScheduleSource(ctx, ids[i], at(i), "bench")
	})
	if err != nil {
		t.Fatalf("schedule %d sources: %v", len(ids), err)
	}
}

// makeDueAhead makes every source due at one time a little ahead (at
// least minLead), and returns at that time: written one by one, they would
// start being polled before the last is written.
func makeDueAhead(ctx context.Context, t testing.TB, st sourceScheduler, ids []int64, minLead time.Duration, side string) time.Time {
	t.Helper()
	lead := max(minLead, 200*time.Millisecond, time.Duration(len(ids))*150*time.Microsecond)
	dueAt := time.Now().Add(lead)
	scheduleSources(ctx, t, st, ids, func(int) time.Time { return dueAt })
	if late := time.Since(dueAt); late > 0 {
		t.Logf("%s: making %d sources due took %v longer than the %v allowed; the round starts late", side, len(ids), late.Round(time.Millisecond), lead)
	}
	time.Sleep(time.Until(dueAt))
	return dueAt
}

// pingdPollRound makes every source due now, wakes the fetch loop once
// (as a ping does) and waits until every poll's outcome is stored.
func pingdPollRound(ctx context.Context, t testing.TB, p *pingdSide, farm *originFarm, ids []int64, woken bool, plan pollPlan, mem *memorySampler, profile string) pollRound {
	t.Helper()
	round := pollRound{Side: sidePingd, Woken: woken, Due: len(ids)}
	// The sources are made due a little ahead, all at one time, and the
	// round starts then: making them due one by one takes a while (10,000
	// UPDATEs), and outcomes the loop stored for the first of them before
	// the round read its counter would leave the round short of its count
	// until its cap. The counter is read first for the same reason.
	stored := p.Store.fetchesStored.Load()
	dueAt := makeDueAhead(ctx, t, p.Store, ids, 0, "pingd polling")
	before := p.Store.Snapshot()
	reqs, changed := farm.requests[sidePingd].Load(), farm.changed[sidePingd].Load()
	disk := diskWriteBytes()
	mem.set(sidePingd)
	stop := startProfile(t, plan.ProfileDir, profile)
	// From the due time: a round that started late has its polls since
	// then in its time.
	cpu, start := selfCPU(), dueAt
	p.Hub.WakeFetcher()
	var done bool
	if woken {
		done = drainDueWithin(ctx, p, stored+int64(len(ids)), plan.RoundCap)
	} else {
		done = waitCount(ctx, &p.Store.fetchesStored, stored+int64(len(ids)), 30*time.Second, plan.RoundCap)
	}
	round.Elapsed = time.Since(start)
	round.CPU = selfCPU() - cpu
	stop()
	mem.set(-1)
	round.DiskBytes = diskWriteBytes() - disk
	round.Polls = p.Store.fetchesStored.Load() - stored
	round.Requests = farm.requests[sidePingd].Load() - reqs
	round.Changed = farm.changed[sidePingd].Load() - changed
	round.Writes = diffCounts(before, p.Store.Snapshot())
	if !done {
		// Cut off at the cap: the sources not polled stay due; the next
		// round makes them due again with the others.
		t.Logf("pingd polling (woken %v) %d due: %d polled in %v", woken, len(ids), round.Polls, round.Elapsed.Round(time.Millisecond))
	}
	return round
}

// plainPollRound polls every feed once with the plain fetcher.
func plainPollRound(ctx context.Context, plain *plainFetcher, farm *originFarm, n int, mem *memorySampler) pollRound {
	round := pollRound{Side: sidePlain, Due: n}
	reqs, changed := farm.requests[sidePlain].Load(), farm.changed[sidePlain].Load()
	mem.set(sidePlain)
	cpu, start := selfCPU(), time.Now()
	round.Polls = plain.pollAll(ctx, allFeeds(n))
	round.Elapsed = time.Since(start)
	round.CPU = selfCPU() - cpu
	mem.set(-1)
	round.Requests = farm.requests[sidePlain].Load() - reqs
	round.Changed = farm.changed[sidePlain].Load() - changed
	// Its idle connections (and their goroutines on both ends) would
	// count in pingd's memory otherwise: each side keeps a pool.
	plain.client.CloseIdleConnections()
	return round
}

// latenessSchedule picks the sources of a lateness run: as many as are
// due within window at rate (at most all), spread over the feeds so they
// fall on every host, the j-th due at t0 + j/rate.
func latenessSchedule(n int, rate float64, window time.Duration, t0 time.Time) (feeds []int, due []time.Time) {
	k := min(n, max(1, int(rate*window.Seconds())))
	for j := range k {
		feeds = append(feeds, int(int64(j)*int64(n)/int64(k)))
		due = append(due, t0.Add(time.Duration(float64(j)/rate*float64(time.Second))))
	}
	return feeds, due
}

// latenessGrace is how long after the last due time a lateness run waits
// for the polls still missing.
const latenessGrace = 20 * time.Second

// pingdLateness schedules sources due evenly at rate over window and
// measures how late pingd's requests for them arrive at the origins.
func pingdLateness(ctx context.Context, t testing.TB, p *pingdSide, farm *originFarm, ids []int64, rate float64, window time.Duration, label string, mem *memorySampler) latenessRun {
	t.Helper()
	// Far enough ahead that writing the schedule is over before the first
	// one is due.
	t0 := time.Now().Add(time.Second + time.Duration(len(ids))*50*time.Microsecond)
	feeds, due := latenessSchedule(len(ids), rate, window, t0)
	picked := make([]int64, len(feeds))
	for j, i := range feeds {
		picked[j] = ids[i]
	}
	scheduleSources(ctx, t, p.Store, picked, func(j int) time.Time { return due[j] })
	farm.resetArrivals(sidePingd)
	stored := p.Store.fetchesStored.Load()
	mem.set(sidePingd)
	deadline := due[len(due)-1].Add(latenessGrace)
	waitCount(ctx, &p.Store.fetchesStored, stored+int64(len(feeds)), time.Until(deadline), time.Until(deadline))
	mem.set(-1)
	return latenessOf(farm, sidePingd, label, len(ids), rate, window, feeds, due)
}

// plainLateness does the same with the plain fetcher: a dispatcher hands
// each feed to the workers at its due time.
func plainLateness(ctx context.Context, plain *plainFetcher, farm *originFarm, n int, rate float64, window time.Duration, label string, mem *memorySampler) latenessRun {
	t0 := time.Now().Add(time.Second)
	feeds, due := latenessSchedule(n, rate, window, t0)
	farm.resetArrivals(sidePlain)
	mem.set(sidePlain)
	plain.pollAt(ctx, feeds, due)
	mem.set(-1)
	return latenessOf(farm, sidePlain, label, n, rate, window, feeds, due)
}

func latenessOf(farm *originFarm, side int, label string, n int, rate float64, window time.Duration, feeds []int, due []time.Time) latenessRun {
	run := latenessRun{Side: side, Label: label, Rate: rate, Window: window, Scheduled: len(feeds),
		Interval: time.Duration(float64(n) / rate * float64(time.Second))}
	end := time.Now()
	for j, i := range feeds {
		at := farm.feeds[i].firstAt[side].Load()
		if at == 0 {
			run.Unpolled++
			run.Late = append(run.Late, end.Sub(due[j]))
			continue
		}
		run.Late = append(run.Late, time.Unix(0, at).Sub(due[j]))
	}
	return run
}

// drainDue waits until pingd has stored target fetch outcomes (target < 0:
// until it stores none for half a second, nothing being due), waking its
// fetch loop every few milliseconds as a stream of pings would. It is for
// setup that is not measured (the baselines, the polls a cut-off round
// left due), done at the pace of the fetch path, not of the loop's timer.
func drainDue(ctx context.Context, p *pingdSide, target int64) bool {
	return drainDueWithin(ctx, p, target, 0)
}

// drainDueWithin is drainDue for at most limit (0: no bound).
func drainDueWithin(ctx context.Context, p *pingdSide, target int64, limit time.Duration) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				p.Hub.WakeFetcher()
			}
		}
	}()
	if target < 0 {
		waitCount(ctx, &p.Store.fetchesStored, math.MaxInt64, 500*time.Millisecond, 0)
		return true
	}
	return waitCount(ctx, &p.Store.fetchesStored, target, time.Minute, limit)
}

// waitCount waits until counter reaches target. It gives up when the
// counter stalled for stall, or after limit (0: no limit); false then.
func waitCount(ctx context.Context, counter *atomic.Int64, target int64, stall, limit time.Duration) bool {
	start := time.Now()
	last, since := counter.Load(), start
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		c := counter.Load()
		if c >= target {
			return true
		}
		if c != last {
			last, since = c, time.Now()
		} else if time.Since(since) > stall {
			return false
		}
		if limit > 0 && time.Since(start) > limit {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// plainFetcher is the limit of the polling measurement: conditional GETs
// of the same feeds with the same worker count and per-host limit as
// pingd's fetch loop, the changed documents parsed with pingd's parser
// (feed.Parse), nothing stored but each feed's validators.
type plainFetcher struct {
	farm    *originFarm
	client  *http.Client
	workers int
	hosts   []*plainHost
	spacing time.Duration

	mu         sync.Mutex
	etag, last []string
	parsed     atomic.Int64
	errors     atomic.Int64
}

// plainHost is one origin host's limits: perHost slots, and the earliest
// time the next request to it may start (spacing).
type plainHost struct {
	slots chan struct{}
	mu    sync.Mutex
	next  time.Time
}

func newPlainFetcher(farm *originFarm, workers, perHost int, spacing time.Duration) *plainFetcher {
	f := &plainFetcher{
		farm: farm,
		// The pool of pingd's client: as many idle connections in all,
		// and net/http's per host as netguard's default.
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			MaxIdleConns: pingdIdleConns, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second,
		}},
		workers: workers,
		spacing: spacing,
		etag:    make([]string, len(farm.feeds)),
		last:    make([]string, len(farm.feeds)),
	}
	for range farm.hosts {
		f.hosts = append(f.hosts, &plainHost{slots: make(chan struct{}, perHost)})
	}
	return f
}

// pollAll polls the feeds in order, as fast as the limits let it, and
// returns the polls finished.
func (f *plainFetcher) pollAll(ctx context.Context, feeds []int) int64 {
	next := make(chan int)
	go func() {
		defer close(next)
		for _, i := range feeds {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	return f.run(ctx, next)
}

// pollAt hands feed feeds[j] to the workers at due[j].
func (f *plainFetcher) pollAt(ctx context.Context, feeds []int, due []time.Time) int64 {
	next := make(chan int)
	go func() {
		defer close(next)
		for j, i := range feeds {
			if d := time.Until(due[j]); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return
				}
			}
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	return f.run(ctx, next)
}

func (f *plainFetcher) run(ctx context.Context, next <-chan int) int64 {
	var polls atomic.Int64
	var wg sync.WaitGroup
	for range f.workers {
		wg.Go(func() {
			for i := range next {
				// A worker waits for a slot of its host and for the host's
				// spacing. Feeds are spread over the hosts round-robin, so
				// the next feeds in line are on other hosts, which wait as
				// long: pingd's loop, which takes a worker only for a host
				// that may be fetched now, has no better choice there.
				h := f.hosts[i%len(f.hosts)]
				h.slots <- struct{}{}
				h.mu.Lock()
				now := time.Now()
				start := maxTime(now, h.next)
				h.next = start.Add(f.spacing)
				h.mu.Unlock()
				time.Sleep(start.Sub(now))
				err := f.poll(ctx, i)
				<-h.slots
				if err != nil {
					f.errors.Add(1)
					continue
				}
				polls.Add(1)
			}
		})
	}
	wg.Wait()
	return polls.Load()
}

func (f *plainFetcher) poll(ctx context.Context, i int) error {
	u := f.farm.FeedURL(i)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	f.mu.Lock()
	etag, last := f.etag[i], f.last[i]
	f.mu.Unlock()
	req.Header.Set("User-Agent", plainUserAgent)
	req.Header.Set("Accept", "application/atom+xml, application/rss+xml, */*;q=0.5")
	req.Header.Set("Accept-Encoding", "gzip, deflate")
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	if last != "" {
		req.Header.Set("If-Modified-Since", last)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, feed.DefaultMaxBodyBytes))
	if err != nil {
		return err
	}
	switch resp.StatusCode {
	case http.StatusNotModified:
		return nil
	case http.StatusOK:
		if _, err := feed.Parse(body, u, time.Now()); err != nil {
			return err
		}
		f.parsed.Add(1)
		f.mu.Lock()
		f.etag[i], f.last[i] = resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
		f.mu.Unlock()
		return nil
	}
	return fmt.Errorf("%s: %s", u, resp.Status)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// diskWriteBytes is what this process has sent to the storage layer so
// far (Linux /proc/self/io write_bytes); 0 where it is not available.
func diskWriteBytes() int64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "write_bytes:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// memorySampler reads this process's resident memory every 50 ms and
// keeps the highest reading per side while that side runs.
type memorySampler struct {
	side   atomic.Int64
	peak   [2]atomic.Int64
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func startMemorySampler(ctx context.Context) *memorySampler {
	ctx, cancel := context.WithCancel(ctx)
	m := &memorySampler{cancel: cancel, done: make(chan struct{})}
	m.side.Store(-1)
	pid := os.Getpid()
	go func() {
		defer close(m.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			side := m.side.Load()
			if side < 0 {
				continue
			}
			if mem, err := readMemory(pid); err == nil && mem.RSS > m.peak[side].Load() {
				m.peak[side].Store(mem.RSS)
			}
		}
	}()
	return m
}

// set says which side runs now (-1: neither).
func (m *memorySampler) set(side int) { m.side.Store(int64(side)) }

func (m *memorySampler) stop() {
	m.once.Do(func() {
		m.cancel()
		<-m.done
	})
}

func (m *memorySampler) peaks() [2]int64 { return [2]int64{m.peak[0].Load(), m.peak[1].Load()} }

// pollSideName names a side in the tables.
func pollSideName(side int) string {
	if side == sidePingd {
		return "pingd"
	}
	return "plain fetcher"
}

// pollTables are the saturation and lateness tables of the results.
func pollTables(results []pollResult) []*table {
	sat := &table{header: []string{"N", "origin hosts", "pingd polls/s (median)", "plain fetcher (median)", "pingd ÷ plain",
		"pingd, loop woken every 5 ms: polls/s, ÷ plain (sources due)", "share changed: pingd / plain",
		"store writes per poll: pingd / woken", "bytes to disk per poll: pingd / woken",
		"process CPU per poll: pingd / woken / plain", "peak resident memory: pingd / plain (origins and nodes alone)", "database per source", "pingd baseline of N"}}
	late := &table{header: []string{"N", "sources due", "polling interval served", "window measured", "side", "polled / scheduled",
		"lateness p50", "p99", "p99 ÷ interval"}}
	bin := &table{header: []string{"N", "pingd serve: polls / due", "first request after the due time", "polls/s (first request to last)", "÷ plain fetcher (median)",
		"its CPU per poll", "resident memory: idle after start / peak (VmHWM) / after the round"}}
	for _, res := range results {
		if res.Skipped != "" {
			sat.add(fmt.Sprint(res.Size.N), fmt.Sprint(res.Size.Hosts), res.Skipped)
			continue
		}
		// The rounds by kind: pingd woken once, the plain fetcher, pingd
		// woken every 5 ms.
		const woken = 2
		var rate, cpu [3][]float64
		var reqs, changed, polls, disk [3]int64
		var writes [3]map[string]int64
		due := 0
		for _, r := range res.Rounds {
			k := r.Side
			if r.Woken {
				k, due = woken, r.Due
			}
			if r.Elapsed > 0 {
				rate[k] = append(rate[k], float64(r.Polls)/r.Elapsed.Seconds())
			}
			if r.Polls > 0 {
				cpu[k] = append(cpu[k], float64(r.CPU)/float64(r.Polls))
			}
			reqs[k] += r.Requests
			changed[k] += r.Changed
			polls[k] += r.Polls
			disk[k] += r.DiskBytes
			if writes[k] == nil {
				writes[k] = map[string]int64{}
			}
			for m, c := range r.Writes {
				writes[k][m] += c
			}
		}
		share := func(k int) string {
			if reqs[k] == 0 {
				return "–"
			}
			return fmt.Sprintf("%.1f %%", 100*float64(changed[k])/float64(reqs[k]))
		}
		diskPerPoll := func(k int) string {
			if polls[k] == 0 {
				return "–"
			}
			return fmt.Sprintf("%.1f KiB", float64(disk[k])/float64(polls[k])/1024)
		}
		wokenRate := "–"
		if len(rate[woken]) > 0 {
			wokenRate = fmt.Sprintf("%s, %s (%d)", perSec(median(rate[woken])), ratio(median(rate[woken]), median(rate[sidePlain])), due)
		}
		cpuCell := func(k int) string {
			if len(cpu[k]) == 0 {
				return "–"
			}
			return us(time.Duration(median(cpu[k])))
		}
		sat.add(fmt.Sprint(res.Size.N), fmt.Sprint(res.Size.Hosts), perSec(median(rate[sidePingd])), perSec(median(rate[sidePlain])),
			ratio(median(rate[sidePingd]), median(rate[sidePlain])), wokenRate,
			share(sidePingd)+" / "+share(sidePlain),
			writesPerPoll(writes[sidePingd], polls[sidePingd])+" / "+writesPerPoll(writes[woken], polls[woken]),
			diskPerPoll(sidePingd)+" / "+diskPerPoll(woken),
			cpuCell(sidePingd)+" / "+cpuCell(woken)+" / "+cpuCell(sidePlain),
			fmt.Sprintf("%s / %s (%s)", mib(res.PeakRSS[sidePingd]), mib(res.PeakRSS[sidePlain]), mib(res.FarmRSS)),
			fmt.Sprintf("%.1f KiB (%s + %s WAL)", float64(res.DBBytes+res.WALBytes)/float64(res.Size.N)/1024, mib(res.DBBytes), mib(res.WALBytes)),
			fmt.Sprintf("%v (%s)", res.Baseline.Round(100*time.Millisecond), perSec(float64(res.Size.N)/res.Baseline.Seconds())))
		if b := res.Binary; b.Err != "" {
			bin.add(fmt.Sprint(res.Size.N), "not measured: "+b.Err)
		} else if b.Due > 0 {
			binRate := 0.0
			if b.Elapsed > 0 {
				binRate = float64(b.Polls-1) / b.Elapsed.Seconds()
			}
			cpuPer := "–"
			if b.Polls > 0 {
				cpuPer = us(b.CPU / time.Duration(b.Polls))
			}
			bin.add(fmt.Sprint(res.Size.N), fmt.Sprintf("%d / %d", b.Polls, b.Due), ms(b.FirstAfter), perSec(binRate), ratio(binRate, median(rate[sidePlain])),
				cpuPer, fmt.Sprintf("%s / %s / %s", mib(b.StartRSS), mib(b.PeakRSS), mib(b.EndRSS)))
		}
		for _, l := range res.Lateness {
			p50, p99 := percentile(l.Late, 50), percentile(l.Late, 99)
			late.add(fmt.Sprint(res.Size.N), fmt.Sprintf("%s (%s)", perSec(l.Rate), l.Label), l.Interval.Round(time.Second).String(),
				l.Window.String(), pollSideName(l.Side), fmt.Sprintf("%d / %d", l.Scheduled-l.Unpolled, l.Scheduled),
				ms(p50), ms(p99), fmt.Sprintf("%.4f", float64(p99)/float64(l.Interval)))
		}
	}
	out := []*table{sat, late}
	if len(bin.rows) > 0 {
		out = append(out, bin)
	}
	return append(out, dbObjectsTable(results))
}

// dbObjectsTable is the database per source by table and index, the
// largest first, the smallest together as "the rest".
func dbObjectsTable(results []pollResult) *table {
	const shown = 8
	t := &table{header: []string{"N", "the source's own tables per source (sources, source_bodies, seen)",
		"database per source, by table or index (SQLite dbstat)"}}
	for _, res := range results {
		if res.Skipped != "" || len(res.DBObjects) == 0 {
			continue
		}
		var parts []string
		var rest int64
		for i, o := range res.DBObjects {
			if i >= shown {
				rest += o.Bytes
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %.2f KiB", o.Name, float64(o.Bytes)/float64(res.Size.N)/1024))
		}
		if rest > 0 {
			parts = append(parts, fmt.Sprintf("the rest %.2f KiB", float64(rest)/float64(res.Size.N)/1024))
		}
		t.add(fmt.Sprint(res.Size.N), fmt.Sprintf("%.2f KiB", float64(sourceTableBytes(res.DBObjects))/float64(res.Size.N)/1024),
			strings.Join(parts, ", "))
	}
	return t
}

// writesPerPoll lists the store writes of pingd's rounds per poll.
func writesPerPoll(d map[string]int64, polls int64) string {
	if polls == 0 {
		return "–"
	}
	var total int64
	var parts []string
	for _, m := range sortedKeys(d) {
		if !slices.Contains(writeMethods, m) {
			continue
		}
		total += d[m]
		parts = append(parts, fmt.Sprintf("%s %.2f", m, float64(d[m])/float64(polls)))
	}
	return fmt.Sprintf("%.2f (%s)", float64(total)/float64(polls), strings.Join(parts, ", "))
}
