package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

type statePlan struct {
	Nodes, Subscriptions int
	// Ops is how many subscribes and publishes are timed on each database.
	Ops int
	// Publishes is how many items the running pingd is asked to fan out.
	Publishes int
}

// memory is a process's resident memory at one moment.
type memory struct {
	RSS, Peak int64 // bytes
}

type stateResult struct {
	DBBytes, WALBytes        int64
	PopulateTime             time.Duration
	SubscribeBig, SubscribeE []time.Duration
	PublishBig, PublishE     []time.Duration
	// Resident memory of the pingd binary on the full and on the empty
	// database, after start, after listing every node over the admin API,
	// and after fanning out Publishes items over XMPP.
	Big, Empty [3]memory
}

// populate fills a database with nodes and XMPP subscriptions, spread
// evenly, through the store as pingd writes them.
func populate(ctx context.Context, t testing.TB, path string, nodes, subs int) {
	t.Helper()
	st, err := store.Open(ctx, path, store.Options{Logger: benchLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := hub.New(hub.Config{Stores: store.HubStores(st), Logger: benchLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, nodes)
	err = parallel(nodes, 4, func(i int) error {
		n, _, err := h.CreateNode(ctx, hub.NodeSpec{Name: fmt.Sprintf("node-%d", i), Config: hub.DefaultNodeConfig()})
		if err == nil {
			ids[i] = n.ID
		}
		return err
	})
	if err != nil {
		t.Fatalf("create nodes: %v", err)
	}
	err = parallel(subs, 4, func(i int) error {
		node := i % nodes
		bare := fmt.Sprintf("user%d@localhost", i/10)
		s := &hub.Subscription{
			NodeID: ids[node], NodeName: fmt.Sprintf("node-%d", node), Kind: hub.KindXMPP,
			Address: bare + "/r" + strconv.Itoa(i%10), BareJID: bare, SubID: hub.RandomID(), State: hub.SubActive,
		}
		_, err := st.PutSubscription(ctx, s)
		return err
	})
	if err != nil {
		t.Fatalf("create subscriptions: %v", err)
	}
}

// timeOps times ops subscribes and ops one-item publishes on random
// nodes of a database through the hub.
func timeOps(ctx context.Context, t testing.TB, path string, nodes, ops int, tag string) (subscribe, publish []time.Duration) {
	t.Helper()
	st, err := store.Open(ctx, path, store.Options{Logger: benchLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := hub.New(hub.Config{Stores: store.HubStores(st), Logger: benchLogger()})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range ops {
		node := fmt.Sprintf("node-%d", rng.IntN(nodes))
		jid := fmt.Sprintf("timed-%s-%d@localhost", tag, i)
		start := time.Now()
		if _, _, err := h.Subscribe(ctx, hub.Subscription{NodeName: node, Kind: hub.KindXMPP, Address: jid + "/r", BareJID: jid}); err != nil {
			t.Fatalf("subscribe: %v", err)
		}
		subscribe = append(subscribe, time.Since(start))
	}
	for i := range ops {
		node := fmt.Sprintf("node-%d", rng.IntN(nodes))
		id := fmt.Sprintf("%s-%d", tag, i)
		start := time.Now()
		if _, err := h.Publish(ctx, node, "bench", []hub.Entry{{ID: id, Title: id, Payload: []byte(`<entry xmlns="http://www.w3.org/2005/Atom"><id>` + id + `</id><title>` + id + `</title></entry>`)}}); err != nil {
			t.Fatalf("publish: %v", err)
		}
		publish = append(publish, time.Since(start))
	}
	return subscribe, publish
}

// buildPingd builds the pingd binary once per test binary run.
func buildPingd(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pingd")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/pingd/pingd/cmd/pingd").CombinedOutput()
	if err != nil {
		t.Fatalf("build pingd: %v\n%s", err, out)
	}
	return bin
}

// readMemory reads VmRSS and VmHWM of a process.
func readMemory(pid int) (memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	defer f.Close()
	var m memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) < 1 {
			continue
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			m.RSS = kb << 10
		case "VmHWM":
			m.Peak = kb << 10
		}
	}
	return m, sc.Err()
}

// process is a started pingd serve.
type process struct {
	cmd *exec.Cmd
	// exited is closed once it has exited.
	exited chan struct{}
}

// startProcess starts cmd in a process group of its own, so that stop can
// kill what it started, and killed with this process if that dies first
// (a test timeout).
func startProcess(cmd *exec.Cmd) (*process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// stop asks it to shut down and kills its group after 20 seconds.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// waitHealthy asks pingd serve at httpAddr for /healthz every interval
// until it answers 200 (nil), the process exits or within has passed.
func (p *process) waitHealthy(hc *http.Client, httpAddr string, within, interval time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		if resp, err := hc.Get("http://" + httpAddr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pingd serve did not answer /healthz within %v", within)
		}
		select {
		case <-p.exited:
			return errors.New("pingd serve exited at start")
		case <-time.After(interval):
		}
	}
}

// runBinary starts pingd serve on a database and measures its memory
// after start, after GET /api/nodes, and after fanning out publishes.
func runBinary(ctx context.Context, t testing.TB, bin, db string, srv *xmppServer, nodes, publishes int) [3]memory {
	t.Helper()
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(),
		"PINGD_DB="+db, "PINGD_XMPP_ADDR="+srv.ComponentAddr, "PINGD_XMPP_DOMAIN="+srv.PingdDomain,
		"PINGD_XMPP_SECRET="+srv.Secret, "PINGD_HTTP_ADDR="+httpAddr, "PINGD_PUBLIC_URL=http://"+httpAddr,
		"PINGD_ADMIN_TOKEN=bench-token", "PINGD_ADMINS="+ownerUser+"@"+srv.Domain, "PINGD_LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	proc, err := startProcess(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer proc.stop()
	base := "http://" + httpAddr
	hc := &http.Client{Timeout: 60 * time.Second}
	testenv.WaitFor(t, 60*time.Second, "pingd to be ready (component connected)", func() bool {
		resp, err := hc.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	var out [3]memory
	measure := func(i int) {
		m, err := readMemory(proc.pid())
		if err != nil {
			t.Fatal(err)
		}
		out[i] = m
	}
	time.Sleep(500 * time.Millisecond) // the component's catch-up after connecting
	measure(0)

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/nodes", nil)
	req.Header.Set("Authorization", "Bearer bench-token")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/nodes: HTTP %d", resp.StatusCode)
	}
	measure(1)

	owner, err := dialClient(ctx, srv.C2SAddr, srv.Domain, ownerUser, benchPassword, fmt.Sprintf("state-%d", time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	acks := make([]<-chan []byte, 0, publishes)
	for i := range publishes {
		node := fmt.Sprintf("node-%d", rng.IntN(nodes))
		ch, err := owner.sendIQ(publishStanza(srv.PingdDomain, node, fmt.Sprintf("state-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, ch)
	}
	for _, ch := range acks {
		if _, err := awaitIQ(ctx, ch); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	time.Sleep(time.Second) // let the notifications go out
	measure(2)
	return out
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// measureState runs measurement 5.
func measureState(ctx context.Context, t testing.TB, plan statePlan) stateResult {
	t.Helper()
	dir := t.TempDir()
	big, empty := filepath.Join(dir, "big.db"), filepath.Join(dir, "empty.db")
	var res stateResult
	start := time.Now()
	populate(ctx, t, big, plan.Nodes, plan.Subscriptions)
	res.PopulateTime = time.Since(start)
	// The empty database has the same node names, without subscriptions,
	// so the timed operations find their nodes.
	populate(ctx, t, empty, plan.Nodes, 0)
	res.DBBytes, res.WALBytes = fileSize(big), fileSize(big+"-wal")

	// Alternate the two databases in halves so neither runs only warm.
	for half := range 2 {
		for _, which := range []string{"big", "empty"} {
			if half == 1 {
				which = map[string]string{"big": "empty", "empty": "big"}[which]
			}
			path := map[string]string{"big": big, "empty": empty}[which]
			sub, pub := timeOps(ctx, t, path, plan.Nodes, plan.Ops/2, fmt.Sprintf("%s%d", which, half))
			if which == "big" {
				res.SubscribeBig, res.PublishBig = append(res.SubscribeBig, sub...), append(res.PublishBig, pub...)
			} else {
				res.SubscribeE, res.PublishE = append(res.SubscribeE, sub...), append(res.PublishE, pub...)
			}
		}
	}

	srv := startProsodyServer(t)
	srv.Register(ownerUser, benchPassword)
	bin := buildPingd(t)
	res.Big = runBinary(ctx, t, bin, big, srv, plan.Nodes, plan.Publishes)
	res.Empty = runBinary(ctx, t, bin, empty, srv, plan.Nodes, plan.Publishes)
	return res
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func stateTables(res stateResult, plan statePlan) []*table {
	size := &table{header: []string{"nodes", "subscriptions", "database file", "WAL", "populated in"}}
	size.add(fmt.Sprint(plan.Nodes), fmt.Sprint(plan.Subscriptions), mib(res.DBBytes), mib(res.WALBytes), res.PopulateTime.Round(time.Millisecond).String())

	mem := &table{header: []string{"pingd serve resident memory", fmt.Sprintf("%d nodes, %d subscriptions", plan.Nodes, plan.Subscriptions), "same nodes, no subscriptions", "ratio"}}
	for i, what := range []string{"after start (component connected)", "after GET /api/nodes", fmt.Sprintf("after fanning out %d XMPP publishes", plan.Publishes)} {
		mem.add(what, mib(res.Big[i].RSS), mib(res.Empty[i].RSS), ratio(float64(res.Big[i].RSS), float64(res.Empty[i].RSS)))
	}
	mem.add("peak (VmHWM)", mib(res.Big[2].Peak), mib(res.Empty[2].Peak), ratio(float64(res.Big[2].Peak), float64(res.Empty[2].Peak)))

	ops := &table{header: []string{"operation (through hub, SQLite)", "full database p50", "p99", "empty database p50", "p99", "ratio of p50"}}
	ops.add("subscribe (XMPP)", ms(percentile(res.SubscribeBig, 50)), ms(percentile(res.SubscribeBig, 99)),
		ms(percentile(res.SubscribeE, 50)), ms(percentile(res.SubscribeE, 99)),
		ratio(float64(percentile(res.SubscribeBig, 50)), float64(percentile(res.SubscribeE, 50))))
	ops.add("publish one item", ms(percentile(res.PublishBig, 50)), ms(percentile(res.PublishBig, 99)),
		ms(percentile(res.PublishE, 50)), ms(percentile(res.PublishE, 99)),
		ratio(float64(percentile(res.PublishBig, 50)), float64(percentile(res.PublishE, 50))))
	return []*table{size, mem, ops}
}
