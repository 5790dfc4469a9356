package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/component"
	"github.com/pingd/pingd/internal/testenv"
)

var (
	flagFull     = flag.Bool("bench.full", false, "run the full sizes (make bench) instead of the quick ones (make bench-quick)")
	flagProfiles = flag.String("bench.profiles", "", "directory for CPU profiles of pingd's side (read them with go tool pprof -tagfocus side=pingd)")
	flagReport   = flag.String("bench.report", "", "also append the result tables to this file")
	flagPollN    = flag.String("bench.poll-n", "", "polling: only these numbers of sources (comma-separated, e.g. 10000), over 1000 hosts")
	flagFollowed = flag.String("bench.followed", "", "BenchmarkFollowedSources: these numbers of sources (comma-separated, e.g. 100000,1000000), filled synthetically; not run without it")
	flagWindow   = flag.Duration("bench.followed-window", 60*time.Second, "BenchmarkFollowedSources: how long the hourly polls' lateness is measured")
	flagPingWait = flag.Duration("bench.ping-commit-delay", 0, "BenchmarkPingIngest: pingd answers a ping once queued and commits the queue within this delay (PINGD_PING_COMMIT_DELAY; 0: after its commit)")
	flagKeepDB   = flag.String("bench.followed-db", "", "BenchmarkFollowedSources: write the databases into this directory and keep them (to look at query plans)")
)

// benchReporter opens the report for one benchmark.
func benchReporter(b *testing.B) *reporter {
	r, closeFn, err := newReporter(*flagReport)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(closeFn)
	return r
}

func profileDir(b *testing.B) string {
	if *flagProfiles == "" {
		return ""
	}
	if err := os.MkdirAll(*flagProfiles, 0o755); err != nil {
		b.Fatal(err)
	}
	return *flagProfiles
}

func sizeName() string {
	if *flagFull {
		return "full"
	}
	return "quick"
}

func commandFor(bench string) string {
	if *flagFull {
		return fmt.Sprintf("make bench (go test ./bench -run '^$' -bench '%s' -benchtime 1x -args -bench.full)", bench)
	}
	return fmt.Sprintf("make bench-quick (go test ./bench -run '^$' -bench '%s' -benchtime 1x)", bench)
}

func fanoutPlanFor(b *testing.B, srv *xmppServer) fanoutPlan {
	if *flagFull {
		plan := fanoutPlan{Sizes: []fanoutSize{{10, 400}, {100, 100}, {1000, 20}}, Rounds: 5, ProfileDir: profileDir(b)}
		if srv.Name == "ejabberd" {
			// ejabberd serves 4,000 notifications to 10 subscribers in a
			// fifth of a second, a round too short to measure on a shared
			// machine (its rates spread threefold): more items.
			plan.Sizes[0].M = 2000
		}
		return plan
	}
	return fanoutPlan{Sizes: []fanoutSize{{10, 100}, {100, 20}}, Rounds: 2, ProfileDir: profileDir(b)}
}

// BenchmarkXMPPFanoutProsody is measurement 1 on Prosody: Prosody's own
// pubsub, the raw component and pingd, alternating.
func BenchmarkXMPPFanoutProsody(b *testing.B) {
	srv := startProsodyServer(b)
	targets := []fanoutTarget{
		{Name: "Prosody pubsub", Service: srv.Native},
		{Name: "raw component", Service: srv.RawDomain},
		{Name: "pingd", Service: srv.PingdDomain},
	}
	benchFanout(b, srv, targets)
}

// BenchmarkXMPPFanoutEjabberd is measurement 1 on ejabberd: mod_pubsub,
// the raw component and pingd, each with and without XEP-0033 multicast.
func BenchmarkXMPPFanoutEjabberd(b *testing.B) {
	srv := startEjabberdServer(b)
	targets := []fanoutTarget{
		{Name: "ejabberd mod_pubsub", Service: srv.Native},
		{Name: "raw component", Service: srv.RawDomain},
		{Name: "raw component + XEP-0033", Service: srv.RawMulticastDomain},
		{Name: "pingd", Service: srv.PingdDomain},
		{Name: "pingd + XEP-0033", Service: srv.PingdMulticastDomain},
		{Name: "pingd + XEP-0033, all through it", Service: srv.PingdMulticastAllDomain},
	}
	benchFanout(b, srv, targets)
}

func benchFanout(b *testing.B, srv *xmppServer, targets []fanoutTarget) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plan := fanoutPlanFor(b, srv)
	startFanoutServices(b, ctx, srv)
	h := newFanoutHarness(ctx, b, srv, plan, targets)
	b.ResetTimer()
	results := h.run(ctx)
	b.StopTimer()
	sums := summarizeFanout(results, targets, plan.Sizes)
	r := benchReporter(b)
	r.section(fmt.Sprintf("XMPP fan-out on %s (%s)", srv.Name, sizeName()), commandFor(b.Name()))
	r.note("%d rounds per size after one warm-up round per target; targets alternate, the order rotating each round; each round starts once the server and the bench process are quiet. "+
		"Rate: notifications read by all subscribers ÷ (last read − first publish sent). Latency: publish sent → notification read, pooled over rounds.", plan.Rounds)
	fanoutTable(sums, "raw component", targets[0].Name).write(r.w)
	median := func(target string, n int) float64 {
		for _, o := range sums {
			if o.Target == target && o.N == n {
				return o.Median
			}
		}
		return 0
	}
	for _, s := range sums {
		switch s.Target {
		case "pingd":
			if raw := median("raw component", s.N); raw > 0 {
				b.ReportMetric(s.Median/raw, fmt.Sprintf("pingd/raw-N%d", s.N))
			}
		case "pingd + XEP-0033":
			if native := median(targets[0].Name, s.N); native > 0 {
				b.ReportMetric(s.Median/native, fmt.Sprintf("pingd-xep0033/native-N%d", s.N))
			}
		}
	}
}

// startFanoutServices connects pingd and the raw components to the server
// and returns the raw components.
func startFanoutServices(b testing.TB, ctx context.Context, srv *xmppServer) []*rawComponent {
	// Where the server offers XEP-0033, the plain pingd target has it off
	// and a second pingd has it on (the default); elsewhere the default
	// finds no service and sends one stanza per subscriber.
	multicast := ""
	for domain, share := range map[string]int{srv.PingdMulticastDomain: 0, srv.PingdMulticastAllDomain: 100} {
		if domain == "" {
			continue
		}
		multicast = component.MulticastOff
		mc := startPingd(b, pingdOptions{
			XMPPAddr: srv.ComponentAddr, Domain: domain, Secret: srv.Secret,
			Admins: []string{ownerUser + "@" + srv.Domain}, MulticastShare: share,
		})
		testenv.WaitFor(b, 30*time.Second, "pingd to find the XEP-0033 service", func() bool {
			svc, _ := mc.Comp.MulticastService()
			return svc != ""
		})
	}
	startPingd(b, pingdOptions{
		XMPPAddr: srv.ComponentAddr, Domain: srv.PingdDomain, Secret: srv.Secret,
		Admins: []string{ownerUser + "@" + srv.Domain}, Multicast: multicast,
	})
	var raws []*rawComponent
	for domain, mc := range map[string]string{srv.RawDomain: "", srv.RawMulticastDomain: srv.Multicast} {
		if domain == "" {
			continue
		}
		rc, err := dialRawComponent(ctx, srv.ComponentAddr, domain, srv.Secret, mc, component.DefaultMulticastShare)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(rc.Close)
		raws = append(raws, rc)
	}
	return raws
}

// TestFanoutSmoke runs the fan-out harness with tiny sizes on both
// servers: every target must deliver every notification exactly once. It
// asserts delivery, never speed.
func TestFanoutSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts Prosody and ejabberd")
	}
	for _, server := range []string{"Prosody", "ejabberd"} {
		t.Run(server, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var srv *xmppServer
			if server == "Prosody" {
				srv = startProsodyServer(t)
			} else {
				srv = startEjabberdServer(t)
			}
			targets := []fanoutTarget{
				{Name: server + " pubsub", Service: srv.Native},
				{Name: "raw component", Service: srv.RawDomain},
				{Name: "pingd", Service: srv.PingdDomain},
			}
			if srv.Multicast != "" {
				targets = append(targets, fanoutTarget{Name: "raw component + XEP-0033", Service: srv.RawMulticastDomain},
					fanoutTarget{Name: "pingd + XEP-0033", Service: srv.PingdMulticastDomain})
			}
			// Prosody writes its pid file a moment after it listens.
			testenv.WaitFor(t, 10*time.Second, "the server's processes to account CPU time to", func() bool { return len(srv.Pids()) > 0 })
			raws := startFanoutServices(t, ctx, srv)
			// Twelve resources of one account: more than a node takes of
			// one account by default (hub.DefaultMaxNodeResources), as
			// the benchmark's accounts have.
			plan := fanoutPlan{Sizes: []fanoutSize{{12, 3}}, Rounds: 1, PerAccount: 12}
			h := newFanoutHarness(ctx, t, srv, plan, targets)
			results := h.run(ctx)
			if len(results) != len(targets) {
				t.Fatalf("%d results, want %d", len(results), len(targets))
			}
			for _, r := range results {
				if r.Received != r.Expected || r.Dups != 0 || r.Errors != 0 {
					t.Errorf("%s: received %d of %d, %d duplicates, %d errors", r.Target, r.Received, r.Expected, r.Dups, r.Errors)
				}
				if len(r.Lat) != r.Received {
					t.Errorf("%s: %d latency samples for %d notifications", r.Target, len(r.Lat), r.Received)
				}
			}
			for _, rc := range raws {
				if n := rc.stanzaErrors.Load(); n > 0 {
					t.Errorf("%s got %d error stanzas, the last: %s", rc.domain, n, *rc.lastError.Load())
				}
			}
			var sb strings.Builder
			fanoutTable(summarizeFanout(results, targets, plan.Sizes), "raw component", targets[0].Name).write(&sb)
			if !strings.Contains(sb.String(), "| 12 | 3 | pingd |") {
				t.Errorf("table lacks pingd's row:\n%s", sb.String())
			}
		})
	}
}

func latencyPlanFor() latencyPlan {
	if *flagFull {
		return latencyPlan{Feeds: 25, Samples: 200, Gap: 20 * time.Millisecond}
	}
	return latencyPlan{Feeds: 10, Samples: 40, Gap: 20 * time.Millisecond}
}

// latencyGoal is the ping → notification p99 the latency measurement is
// held to on loopback, not saturated (docs/benchmarks.md).
const latencyGoal = 50 * time.Millisecond

// BenchmarkPingLatency is measurement 2: ping → notification on loopback.
func BenchmarkPingLatency(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plan := latencyPlanFor()
	b.ResetTimer()
	res := measureLatency(ctx, b, plan)
	b.StopTimer()
	r := benchReporter(b)
	r.section(fmt.Sprintf("Ping → notification latency (%s)", sizeName()), commandFor(b.Name()))
	r.note("%d sequential pings (weblogUpdates.ping over /RPC2), %v apart, over %d feeds on a loopback server with ETags; "+
		"each ping adds one entry, pingd fetches conditionally (%d fetches for %d pings) and notifies one XMPP subscriber through Prosody. "+
		"The per-host ping limit is raised for this measurement: every feed is on the one loopback feed server.",
		plan.Samples, plan.Gap, plan.Feeds, res.Fetches, plan.Samples)
	latencyTable(res).write(r.w)
	if err := checkLatency(res, plan); err != nil {
		b.Error(err)
	}
	if len(res.Ping) > 0 {
		p99 := percentile(res.Ping, 99)
		b.ReportMetric(float64(p99)/1e6, "ping-p99-ms")
		b.ReportMetric(float64(p99)/float64(latencyGoal), "ping-p99/goal")
	}
}

// TestLatencySmoke runs measurement 2 with a handful of pings: each must
// produce exactly its notification.
func TestLatencySmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts Prosody")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plan := latencyPlan{Feeds: 2, Samples: 4, Gap: 10 * time.Millisecond}
	res := measureLatency(ctx, t, plan)
	if err := checkLatency(res, plan); err != nil {
		t.Fatal(err)
	}
	if res.Fetches < plan.Samples {
		t.Errorf("%d fetches for %d pings", res.Fetches, plan.Samples)
	}
}

func webhookPlanFor() webhookPlan {
	if *flagFull {
		return webhookPlan{Sizes: []webhookSize{{10, 16}, {100, 16}, {10000, 16}, {10, 1}, {100, 1}}, Rounds: 3}
	}
	return webhookPlan{Sizes: []webhookSize{{10, 16}, {100, 16}, {1000, 16}, {20, 1}}, Rounds: 1}
}

// BenchmarkWebhookFanout is measurement 3: webhook deliveries per second
// against a plain net/http client, and the store writes a publish costs.
func BenchmarkWebhookFanout(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plan := webhookPlanFor()
	plan.ProfileDir = profileDir(b)
	b.ResetTimer()
	rounds := measureWebhooks(ctx, b, plan)
	b.StopTimer()
	r := benchReporter(b)
	r.section(fmt.Sprintf("Webhook fan-out (%s)", sizeName()), commandFor(b.Name()))
	r.note("One item published to a node with N GetPingd webhook subscriptions (POST, full Atom entries), spread evenly over "+
		"receiver hosts (ports of one loopback sink); the time runs from hub.Publish until the sink has all N requests. "+
		"The delivery engine runs with its defaults, %d workers and %d requests at once per host. The limit: a plain net/http "+
		"client sending the same body and headers to the same N URLs with as many requests at once as the engine may send to "+
		"those hosts. %d rounds per size (%d for N ≤ 200, whose rounds take milliseconds), the two sides alternating; SQLite store. "+
		"Store writes are calls of hub.Store methods that change the database; hub.Publish's own are counted apart from the "+
		"deliveries running meanwhile.",
		engineWorkers, enginePerHost, plan.Rounds, roundsFor(plan.Rounds, 10))
	webhookTable(rounds, plan.Sizes).write(r.w)
	for _, size := range plan.Sizes {
		var pr, rr []float64
		for _, x := range rounds {
			if x.N == size.N && x.Hosts == size.Hosts {
				pr, rr = append(pr, 1/x.Pingd.Seconds()), append(rr, 1/x.Raw.Seconds())
			}
		}
		if r := median(rr); r > 0 {
			b.ReportMetric(median(pr)/r, fmt.Sprintf("pingd/plain-N%d-hosts%d", size.N, size.Hosts))
		}
	}
}

// TestWebhookSmoke runs measurement 3 with tiny sizes: every subscriber
// gets every item once, and publishing writes once whatever N is.
func TestWebhookSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rounds := measureWebhooks(ctx, t, webhookPlan{Sizes: []webhookSize{{3, 1}, {30, 8}}, Rounds: 1})
	if want := roundsFor(1, 3) + roundsFor(1, 30); len(rounds) != want {
		t.Fatalf("%d rounds, want %d", len(rounds), want)
	}
	for _, r := range rounds {
		if r.PingdMissing != 0 || r.Dups != 0 {
			t.Errorf("N=%d: %d missing, %d duplicate deliveries", r.N, r.PingdMissing, r.Dups)
		}
		if w := writes(r.PublishCalls); w != 1 || r.PublishCalls["Append"] != 1 {
			t.Errorf("N=%d: hub.Publish made %d store writes (%v), want one Append", r.N, w, r.PublishCalls)
		}
		if r.Pingd <= 0 || r.Raw <= 0 {
			t.Errorf("N=%d: durations %v and %v", r.N, r.Pingd, r.Raw)
		}
	}
}

func ingestPlanFor() ingestPlan {
	if *flagFull {
		return ingestPlan{Concurrency: []int{1, 8, 64}, Duration: 5 * time.Second, Rounds: 3}
	}
	return ingestPlan{Concurrency: []int{1, 8, 64}, Duration: time.Second, Rounds: 1}
}

// BenchmarkPingIngest is measurement 4: XML-RPC pings accepted and stored
// per second at 1, 8 and 64 concurrent pingers.
func BenchmarkPingIngest(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plan := ingestPlanFor()
	plan.ProfileDir = profileDir(b)
	plan.CommitDelay = *flagPingWait
	b.ResetTimer()
	rounds := measureIngest(ctx, b, plan)
	b.StopTimer()
	r := benchReporter(b)
	r.section(fmt.Sprintf("Ping ingest (%s)", sizeName()), commandFor(b.Name()))
	r.note("weblogUpdates.ping over POST /RPC2, each ping naming its own URL, keep-alive connections, for %v per side and level, "+
		"%d rounds alternating with a net/http handler that reads the call and sends the same answer without storing it. "+
		"%s; \"stored\" counts the pings the store holds afterwards.",
		plan.Duration, plan.Rounds, ingestAnswerNote(plan))
	ingestTable(rounds, plan).write(r.w)
	for _, c := range plan.Concurrency {
		var pr, lr []float64
		for _, x := range rounds {
			if x.Conc == c {
				pr, lr = append(pr, x.Pingd), append(lr, x.Limit)
			}
		}
		if l := median(lr); l > 0 {
			b.ReportMetric(median(pr)/l, fmt.Sprintf("pingd/canned-c%d", c))
		}
	}
}

// TestIngestSmoke sends pings for a moment: every accepted ping is stored,
// also when pingd answers once a ping is queued (PINGD_PING_COMMIT_DELAY).
func TestIngestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	for _, delay := range []time.Duration{0, 2 * time.Millisecond} {
		t.Run(fmt.Sprintf("commit-delay-%v", delay), func(t *testing.T) { ingestSmoke(t, delay) })
	}
}

func ingestSmoke(t *testing.T, delay time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plan := ingestPlan{Concurrency: []int{1, 4}, Duration: 200 * time.Millisecond, Rounds: 1, CommitDelay: delay}
	for _, r := range measureIngest(ctx, t, plan) {
		if r.Wanted == 0 || r.Stored != r.Wanted || r.PingdErrors != 0 {
			t.Errorf("concurrency %d: %d accepted, %d stored, %d refused", r.Conc, r.Wanted, r.Stored, r.PingdErrors)
		}
		if r.Limit <= 0 {
			t.Errorf("concurrency %d: the limit side accepted nothing", r.Conc)
		}
	}
}

func statePlanFor() statePlan {
	if *flagFull {
		return statePlan{Nodes: 10000, Subscriptions: 100000, Ops: 400, Publishes: 200}
	}
	return statePlan{Nodes: 500, Subscriptions: 5000, Ops: 100, Publishes: 50}
}

// BenchmarkStateScale is measurement 5: database size and pingd's
// resident memory with many nodes and subscriptions, and subscribe and
// publish times there against an empty database.
func BenchmarkStateScale(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plan := statePlanFor()
	b.ResetTimer()
	res := measureState(ctx, b, plan)
	b.StopTimer()
	r := benchReporter(b)
	r.section(fmt.Sprintf("Scale of state (%s)", sizeName()), commandFor(b.Name()))
	r.note("SQLite database with %d nodes and %d XMPP subscriptions (10 per node), written through the store. "+
		"Memory is that of the real binary (go build ./cmd/pingd; pingd serve, connected to Prosody), read from /proc, "+
		"next to the same binary on a database with the same nodes and no subscriptions. "+
		"Subscribe and publish are timed in-process through the hub (%d each per database, alternating the databases).",
		plan.Nodes, plan.Subscriptions, plan.Ops)
	for _, t := range stateTables(res, plan) {
		t.write(r.w)
	}
	b.ReportMetric(float64(res.Big[2].Peak)/(1<<20), "peak-MiB")
}

// TestStateSmoke runs measurement 5 small: it must produce memory
// readings and timings for both databases.
func TestStateSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds pingd and starts Prosody")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	plan := statePlan{Nodes: 20, Subscriptions: 100, Ops: 4, Publishes: 5}
	res := measureState(ctx, t, plan)
	for i := range 3 {
		if res.Big[i].RSS <= 0 || res.Empty[i].RSS <= 0 {
			t.Errorf("no memory reading at step %d: %+v %+v", i, res.Big[i], res.Empty[i])
		}
	}
	if res.DBBytes <= 0 || len(res.SubscribeBig) != plan.Ops || len(res.PublishE) != plan.Ops {
		t.Errorf("db %d bytes, %d subscribe and %d publish timings", res.DBBytes, len(res.SubscribeBig), len(res.PublishE))
	}
}

// flagPollRounds sets the polling measurement's rounds per side.
var flagPollRounds = flag.Int("bench.poll-rounds", 0, "polling: this many rounds of each side instead of the size's (2 quick, 3 full): steadier medians, profiles with more samples")

func pollPlanFor() (pollPlan, error) {
	plan := pollPlanOfSize()
	if *flagPollN != "" {
		plan.Sizes = nil
		for _, f := range strings.Split(*flagPollN, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				return plan, fmt.Errorf("-bench.poll-n: %q is not a number of sources", f)
			}
			plan.Sizes = append(plan.Sizes, pollSize{n, min(n, 1000)})
		}
	}
	if *flagPollRounds > 0 {
		plan.Rounds = *flagPollRounds
	}
	return plan, nil
}

func pollPlanOfSize() pollPlan {
	if *flagFull {
		return pollPlan{
			Sizes:  []pollSize{{1000, 1000}, {10000, 1000}, {100000, 1000}},
			Rounds: 3, ChangeShare: 0.05, RoundCap: 30 * time.Second, LatenessWindow: 30 * time.Second, Hourly: true,
			BaselineBudget: 5 * time.Minute,
			LatenessAt:     []latenessRate{{Rate: 100000 / time.Hour.Seconds(), Label: "100,000 polled hourly", Interval: time.Hour}},
		}
	}
	return pollPlan{Sizes: []pollSize{{1000, 1000}}, Rounds: 2, ChangeShare: 0.05, RoundCap: 8 * time.Second, LatenessWindow: 5 * time.Second}
}

// BenchmarkPolling is measurement 6: how many followed sources one pingd
// polls a second, against a plain fetcher doing the same conditional GETs
// with the same limits and storing nothing, and how late polls run
// against their due times.
func BenchmarkPolling(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plan, err := pollPlanFor()
	if err != nil {
		b.Fatal(err)
	}
	plan.ProfileDir = profileDir(b)
	b.ResetTimer()
	results := measurePolling(ctx, b, plan)
	b.StopTimer()
	r := benchReporter(b)
	r.section(fmt.Sprintf("Polling (%s)", sizeName()), commandFor(b.Name()))
	r.note("N nodes, each following its own RSS feed (20 entries, %d bytes) on a loopback origin farm: each host its own 127.77.x.y address, "+
		"the feeds spread over the hosts round-robin. A feed answers 304 to a matching validator (ETag, Last-Modified) and, on %.0f %% of the polls, "+
		"has one new entry and answers 200. pingd: the hub's fetch loop, the feed fetcher and scheduler and SQLite, wired as cmd/pingd wires them, "+
		"%d fetch workers and %d fetches per host (its defaults). The baselines are fetched first (not measured); then, %d rounds per size, "+
		"every source is made due at one time (written a little ahead; the round's clock starts at that time, a second after the side's last round) "+
		"and the loop woken once (as a ping wakes it), pingd and the plain fetcher alternating; "+
		"a pingd round ends when every poll's outcome is stored (or after %v). The plain fetcher: net/http with pingd's pool sizes, the same "+
		"workers and per-host limit, the same conditional GETs, the changed documents parsed with feed.Parse, nothing stored. "+
		"Store writes are calls of hub.Store methods that change the database; bytes to disk are the process's write_bytes (/proc/self/io); "+
		"CPU and resident memory are the whole process's (the origin farm included, on both sides). Lateness: sources made due evenly at "+
		"the rate shown over the window, the request's arrival at the origin against its due time (a source not polled by %v after the "+
		"last due time counts as late until then). Last, pingd serve (the real binary, in a process of its own, its log at info level, no XMPP "+
		"server to connect to) polls every source once more on the same database, made due 1.5 s ahead and woken by nothing but its loop's timer (the next due time it reads on a tick): "+
		"its own CPU and resident memory (VmRSS once started and idle, VmHWM over its life, VmRSS after the round).",
		len(originDocument(0, originEntries-1)), 100*plan.ChangeShare, pollWorkers, pollPerHost, plan.Rounds, plan.RoundCap, latenessGrace)
	for _, t := range pollTables(results) {
		t.write(r.w)
	}
	for _, res := range results {
		if res.Skipped != "" {
			continue
		}
		var pr, fr []float64
		for _, x := range res.Rounds {
			if x.Elapsed <= 0 || x.Woken {
				continue
			}
			if x.Side == sidePingd {
				pr = append(pr, float64(x.Polls)/x.Elapsed.Seconds())
			} else {
				fr = append(fr, float64(x.Polls)/x.Elapsed.Seconds())
			}
		}
		b.ReportMetric(median(pr)/median(fr), fmt.Sprintf("pingd/plain-N%d", res.Size.N))
		// The database per followed source: the whole file (its column in
		// the table), and the source's own tables in it (fetch state, last
		// body, seen ids; not the node's log).
		suffix := ""
		if len(results) > 1 {
			suffix = fmt.Sprintf("-N%d", res.Size.N)
		}
		b.ReportMetric(float64(res.DBBytes+res.WALBytes)/float64(res.Size.N)/1024, "db-KiB-per-source"+suffix)
		if len(res.DBObjects) > 0 {
			b.ReportMetric(float64(sourceTableBytes(res.DBObjects))/float64(res.Size.N)/1024, "source-tables-KiB-per-source"+suffix)
		}
		reportPollMetrics(b, res, median(fr))
	}
}

// reportPollMetrics reports the rest of a size's ratios as benchmark
// metrics, for scripts reading make bench-quick: pingd serve's round
// against the plain fetcher, how late its first request came, its
// memory, and the worst lateness p99 of pingd's runs against their
// polling intervals.
func reportPollMetrics(b *testing.B, res pollResult, plainRate float64) {
	n := res.Size.N
	if bin := res.Binary; bin.Err == "" && bin.Elapsed > 0 && plainRate > 0 {
		b.ReportMetric(float64(bin.Polls-1)/bin.Elapsed.Seconds()/plainRate, fmt.Sprintf("serve/plain-N%d", n))
		b.ReportMetric(float64(bin.FirstAfter)/float64(time.Millisecond), fmt.Sprintf("serve-first-ms-N%d", n))
		b.ReportMetric(float64(bin.PeakRSS)/(1<<20), fmt.Sprintf("serve-peak-MiB-N%d", n))
	}
	worst, worstMs := -1.0, 0.0
	for _, l := range res.Lateness {
		if l.Side != sidePingd || l.Interval <= 0 {
			continue
		}
		p99 := percentile(l.Late, 99)
		if r := float64(p99) / float64(l.Interval); r > worst {
			worst, worstMs = r, float64(p99)/float64(time.Millisecond)
		}
	}
	if worst >= 0 {
		b.ReportMetric(worst, fmt.Sprintf("lateness-p99/interval-N%d", n))
		b.ReportMetric(worstMs, fmt.Sprintf("lateness-p99-ms-N%d", n))
	}
}

// TestPollingSmoke runs measurement 6 tiny: both sides poll every source
// in each round, conditionally (most polls answered 304), and the tables
// have their rows.
func TestPollingSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 16
	plan := pollPlan{Sizes: []pollSize{{n, n}}, Rounds: 2, ChangeShare: 0.25, RoundCap: 30 * time.Second, LatenessWindow: time.Second,
		WokenSources: n / 2}
	results := measurePolling(ctx, t, plan)
	res := results[0]
	if len(res.Rounds) != 3*plan.Rounds {
		t.Fatalf("%d rounds, want %d", len(res.Rounds), 3*plan.Rounds)
	}
	changed := map[string]int64{}
	for _, r := range res.Rounds {
		side := fmt.Sprintf("%s (woken %v)", pollSideName(r.Side), r.Woken)
		want := map[bool]int{false: n, true: n / 2}[r.Woken]
		if r.Due != want || r.Polls != int64(want) || r.Requests != int64(want) {
			t.Errorf("%s: %d due, %d polls and %d requests, want %d each", side, r.Due, r.Polls, r.Requests, want)
		}
		// A changed feed's outcome is stored by ApplyFetch; unchanged
		// ones may share batches.
		if r.Side == sidePingd && (r.Writes["ApplyFetch"] < r.Changed || r.Writes["ApplyFetch"] > int64(want)) {
			t.Errorf("%s: store writes %v for %d changed of %d polls", side, r.Writes, r.Changed, want)
		}
		changed[side] += r.Changed
	}
	// Conditional GETs: most polls are answered 304 (about a quarter
	// change here), on both sides.
	for side, c := range changed {
		if c == 0 || c > int64(n/2*plan.Rounds) {
			t.Errorf("%s: %d polls found a change, want about a quarter", side, c)
		}
	}
	if len(res.Lateness) != 2 {
		t.Fatalf("%d lateness runs, want 2", len(res.Lateness))
	}
	for _, l := range res.Lateness {
		if l.Scheduled == 0 || l.Unpolled != 0 {
			t.Errorf("%s lateness: %d of %d scheduled sources not polled", pollSideName(l.Side), l.Unpolled, l.Scheduled)
		}
	}
	if res.DBBytes <= 0 {
		t.Errorf("database size %d", res.DBBytes)
	}
	// pingd serve in its own process polls every source once more, and
	// its memory is read.
	if b := res.Binary; b.Err != "" || b.Polls != n || b.StartRSS <= 0 || b.PeakRSS < b.StartRSS {
		t.Errorf("pingd serve's round: %+v, want %d polls and its memory", b, n)
	}
	var sb strings.Builder
	for _, tb := range pollTables(results) {
		tb.write(&sb)
	}
	// The database by table: the source's own tables are counted, and
	// the largest table, the nodes' items, is listed.
	if sourceTableBytes(res.DBObjects) <= 0 || !strings.Contains(sb.String(), "| events ") {
		t.Errorf("database by table: %+v", res.DBObjects)
	}
	if !strings.Contains(sb.String(), "| 16 | 16 |") || !strings.Contains(sb.String(), "| plain fetcher |") {
		t.Errorf("tables lack their rows:\n%s", sb.String())
	}
}

// BenchmarkFollowedSources is pingd serve following many sources: N
// sources filled straight into SQLite (no baseline fetches), each followed
// by a node, due evenly over an hour on a loopback origin farm; its start,
// its memory while it polls them at their hourly rate, their lateness,
// and the status page and admin lists. Only with -bench.followed.
func BenchmarkFollowedSources(b *testing.B) {
	if *flagFollowed == "" {
		b.Skip("run with -bench.followed=N[,N…] (e.g. 100000,1000000)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var results []followedResult
	for _, f := range strings.Split(*flagFollowed, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("-bench.followed: %q is not a number of sources", f)
		}
		results = append(results, measureFollowedSources(ctx, b, n, min(n, 1000), *flagWindow, *flagKeepDB))
	}
	b.StopTimer()
	r := benchReporter(b)
	r.section("Followed sources", commandFor(b.Name()))
	r.note("N sources over 1000 loopback origin hosts, each followed by a node of its own, written straight into SQLite in two INSERT … SELECT "+
		"statements (baselined, the origin's validators stored, no fetch made), due evenly over an hour from a minute or two after the fill. "+
		"pingd serve (the real binary, %d fetch workers, %d per host, %v host spacing, its log at info level, no XMPP server) starts on them: "+
		"the time to /healthz 200 and to its first poll (one source made due at its start), its resident memory, then the lateness of the "+
		"sources due over the window from 10 s after the first due time (the origins answer every poll 304), and last one GET each of the status page, /api/status and "+
		"the admin node list's first page, then the whole node list read a page of 1000 at a time (its time the sum of the pages').", pollWorkers, pollPerHost, pollSpacing)
	tab := &table{header: []string{"N", "fill", "database", "/healthz 200 after", "first poll after", "resident: idle / peak (VmHWM) / end",
		"due", "polled / scheduled", "lateness p50", "p99", "p99 ÷ interval", "CPU per poll"}}
	pages := &table{header: []string{"N", "GET", "status", "bytes read", "took", "pingd serve's VmHWM after the pages"}}
	for _, res := range results {
		if res.Err != "" {
			tab.add(fmt.Sprint(res.N), "not measured: "+res.Err)
			continue
		}
		p50, p99 := percentile(res.Late, 50), percentile(res.Late, 99)
		cpu := "–"
		if polled := res.Scheduled - res.Unpolled; polled > 0 {
			cpu = us(res.CPU / time.Duration(polled))
		}
		tab.add(fmt.Sprint(res.N), res.Fill.Round(100*time.Millisecond).String(), mib(res.DBBytes), ms(res.Healthy), ms(res.FirstPoll),
			fmt.Sprintf("%s / %s / %s", mib(res.IdleRSS), mib(res.PeakRSS), mib(res.EndRSS)), perSec(res.Rate)+" over "+res.Window.String(),
			fmt.Sprintf("%d / %d", res.Scheduled-res.Unpolled, res.Scheduled), ms(p50), ms(p99), fmt.Sprintf("%.5f", float64(p99)/float64(time.Hour)), cpu)
		for _, p := range res.Pages {
			pages.add(fmt.Sprint(res.N), p.Path, fmt.Sprint(p.Status), fmt.Sprint(p.Bytes), ms(p.Took), mib(res.PagesPeakRSS))
		}
		b.ReportMetric(res.Healthy.Seconds(), fmt.Sprintf("healthy-s-N%d", res.N))
		b.ReportMetric(res.FirstPoll.Seconds(), fmt.Sprintf("first-poll-s-N%d", res.N))
		b.ReportMetric(float64(res.PeakRSS)/(1<<20), fmt.Sprintf("peak-MiB-N%d", res.N))
		b.ReportMetric(float64(p99)/float64(time.Hour), fmt.Sprintf("lateness-p99/interval-N%d", res.N))
	}
	tab.write(r.w)
	pages.write(r.w)
}
