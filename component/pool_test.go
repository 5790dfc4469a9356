package component

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// poolRecorder runs jobs for the pool tests and records what ran.
type poolRecorder struct {
	mu      sync.Mutex
	order   map[string][]int // key → job numbers in the order they ran
	runs    map[int]int      // job number → times it ran
	batches [][]int
	running atomic.Int32
	most    atomic.Int32
	hold    chan struct{} // when set, jobs wait on it
}

func newPoolRecorder() *poolRecorder {
	return &poolRecorder{order: map[string][]int{}, runs: map[int]int{}}
}

func jobNumber(j *job) int {
	var n int
	fmt.Sscanf(j.iq.attr("id"), "j%d", &n)
	return n
}

func (r *poolRecorder) run(_ context.Context, j *job) {
	now := r.running.Add(1)
	for {
		m := r.most.Load()
		if now <= m || r.most.CompareAndSwap(m, now) {
			break
		}
	}
	if r.hold != nil {
		<-r.hold
	}
	time.Sleep(time.Millisecond)
	members := j.batch
	if len(members) == 0 {
		members = []*job{j}
	}
	r.mu.Lock()
	var nums []int
	for _, m := range members {
		n := jobNumber(m)
		nums = append(nums, n)
		r.runs[n]++
		r.order[m.key] = append(r.order[m.key], n)
	}
	if len(j.batch) > 0 {
		r.batches = append(r.batches, nums)
	}
	r.mu.Unlock()
	r.running.Add(-1)
}

func xmlAttr(name, value string) xml.Attr { return xml.Attr{Name: xml.Name{Local: name}, Value: value} }

func testJob(n int, key string, op op, node, from string) *job {
	el := &element{}
	el.Attr = append(el.Attr, xmlAttr("id", fmt.Sprintf("j%d", n)))
	j := jid.MustParse(from)
	return &job{key: key, iq: el, req: &request{Op: op, Node: node, HasNode: node != ""}, from: j, sender: j.Bare().String()}
}

func TestRequestPoolOrderPerKeyAndConcurrency(t *testing.T) {
	rec := newPoolRecorder()
	p := newRequestPool(context.Background(), 0, rec.run)
	const perKey = 40
	keys := []string{"node\x00a", "node\x00b", "node\x00c", ""}
	n := 0
	for i := range perKey {
		for _, k := range keys {
			n++
			// Retracts never batch: every job runs on its own.
			if err := p.submit(testJob(n, k, opRetract, k, fmt.Sprintf("u%d@localhost/r", i))); err != nil {
				t.Fatalf("submit refused: %v", err)
			}
		}
	}
	p.close()
	if len(rec.runs) != n {
		t.Fatalf("%d jobs ran, want %d", len(rec.runs), n)
	}
	for num, times := range rec.runs {
		if times != 1 {
			t.Errorf("job %d ran %d times", num, times)
		}
	}
	for _, k := range keys[:3] {
		got := rec.order[k]
		for i := 1; i < len(got); i++ {
			if got[i] < got[i-1] {
				t.Fatalf("key %q ran out of order: %v", k, got)
			}
		}
	}
	if rec.most.Load() < 2 {
		t.Errorf("at most %d jobs ran at once; jobs of different nodes should run concurrently", rec.most.Load())
	}
}

func TestRequestPoolBatchesWaitingPublishes(t *testing.T) {
	rec := newPoolRecorder()
	rec.hold = make(chan struct{})
	p := newRequestPool(context.Background(), 0, rec.run)
	key := "node\x00news"
	// The first publish runs (and waits); the rest queue behind it.
	p.submit(testJob(1, key, opPublish, "news", "owner@localhost/a"))
	for i := 2; i <= 6; i++ {
		p.submit(testJob(i, key, opPublish, "news", "owner@localhost/a"))
	}
	// A publish by someone else and a retract are not batched with them,
	// and what follows them waits its turn.
	p.submit(testJob(7, key, opPublish, "news", "other@localhost/a"))
	p.submit(testJob(8, key, opRetract, "news", "owner@localhost/a"))
	p.submit(testJob(9, key, opPublish, "news", "owner@localhost/b"))
	p.submit(testJob(10, key, opPublish, "news", "owner@localhost/c"))
	close(rec.hold)
	p.close()

	want := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if got := rec.order[key]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	// Publishes of the same bare JID batch, whatever the resource.
	wantBatches := [][]int{{2, 3, 4, 5, 6}, {9, 10}}
	if fmt.Sprint(rec.batches) != fmt.Sprint(wantBatches) {
		t.Fatalf("batches %v, want %v", rec.batches, wantBatches)
	}
	for num, times := range rec.runs {
		if times != 1 {
			t.Errorf("job %d ran %d times", num, times)
		}
	}
}

func TestRequestPoolBoundsPending(t *testing.T) {
	rec := newPoolRecorder()
	rec.hold = make(chan struct{})
	const perSender = 5
	p := newRequestPool(context.Background(), perSender, rec.run)
	// One sender's share: the next of its jobs is refused at once,
	// whichever resource sends it; another sender's still goes in.
	for i := range perSender {
		if err := p.submit(testJob(i, "", opRetract, "", fmt.Sprintf("u@localhost/r%d", i))); err != nil {
			t.Fatalf("job %d of the share refused: %v", i, err)
		}
	}
	if err := p.submit(testJob(100, "", opRetract, "", "u@localhost/other")); !errors.Is(err, errSenderBusy) {
		t.Fatalf("a job beyond the sender's share: %v, want refused as busy", err)
	}
	// The pool's own bound: many senders fill it; then anyone is refused.
	n := perSender
	for i := 0; n < maxPendingRequests; i++ {
		for range perSender {
			if n == maxPendingRequests {
				break
			}
			if err := p.submit(testJob(n, "", opRetract, "", fmt.Sprintf("s%d@localhost", i))); err != nil {
				t.Fatalf("job %d refused: %v", n, err)
			}
			n++
		}
	}
	if err := p.submit(testJob(n, "", opRetract, "", "fresh@localhost")); !errors.Is(err, errPoolFull) {
		t.Fatalf("a job beyond the pool's bound: %v, want refused as full", err)
	}
	// An admin is held to the pool's bound only; a multicast bounce to
	// none.
	admin := testJob(n+1, "", opRetract, "", "admin@localhost")
	admin.bounds = boundPool
	if err := p.submit(admin); !errors.Is(err, errPoolFull) {
		t.Fatalf("an admin's job beyond the pool's bound: %v, want refused as full", err)
	}
	bounce := testJob(n+2, "", opRetract, "", "multicast.localhost")
	bounce.bounds, bounce.sender = boundNone, ""
	if err := p.submit(bounce); err != nil {
		t.Fatalf("a multicast bounce refused: %v", err)
	}
	close(rec.hold)
	p.close()
	if len(rec.runs) != maxPendingRequests+1 {
		t.Fatalf("%d jobs ran, want %d", len(rec.runs), maxPendingRequests+1)
	}
	// Finished jobs free their share.
	p = newRequestPool(context.Background(), perSender, rec.run)
	for i := range 3 * perSender {
		if err := p.submit(testJob(2000+i, "", opRetract, "", "u@localhost/r")); err != nil {
			testenv.WaitFor(t, 10*time.Second, "the share to free", func() bool {
				return p.submit(testJob(2000+i, "", opRetract, "", "u@localhost/r")) == nil
			})
		}
	}
	p.close()
}

// TestRequestPoolTakesSendersInTurn: a sender with many jobs waiting does
// not delay another sender's one job: workers take the senders in turn.
// The pool here has no workers, so the test takes the jobs itself, in the
// order workers would.
func TestRequestPoolTakesSendersInTurn(t *testing.T) {
	p := &requestPool{perSender: DefaultPendingPerSender, bySender: map[string]int{}, waiting: map[string][]*job{}, runnable: map[string][]*job{}}
	p.ready.L, p.idle.L = &p.mu, &p.mu
	for i := range DefaultPendingPerSender {
		if err := p.submit(testJob(i, "", opRetract, "", "flood@localhost/r")); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.submit(testJob(1000, "", opRetract, "", "calm@localhost/r")); err != nil {
		t.Fatal(err)
	}
	if err := p.submit(testJob(1001, "", opRetract, "", "calm@localhost/r")); err != nil {
		t.Fatal(err)
	}
	var order []int
	for range DefaultPendingPerSender + 2 {
		order = append(order, jobNumber(p.next()))
	}
	if want := []int{0, 1000, 1, 1001, 2, 3}; fmt.Sprint(order[:6]) != fmt.Sprint(want) {
		t.Fatalf("jobs taken in the order %v…, want %v…", order[:6], want)
	}
}

// TestRequestPoolRunsOthersWhileJobsWaitSlowly: jobs that report a slow
// wait (a baseline fetch) do not hold the pool: more of them than there are
// workers wait at once and other jobs still run; the requests queued behind
// a waiting job's node still wait for it; once they are done, no more than
// requestWorkers jobs run at once again.
func TestRequestPoolRunsOthersWhileJobsWaitSlowly(t *testing.T) {
	synctest.Test(t, testRequestPoolRunsOthersWhileJobsWaitSlowly)
}

func testRequestPoolRunsOthersWhileJobsWaitSlowly(t *testing.T) {
	release := make(chan struct{})
	var waiting atomic.Int32
	var mu sync.Mutex
	var order []int
	burst := newPoolRecorder()
	burst.hold = make(chan struct{})
	run := func(ctx context.Context, j *job) {
		if jobNumber(j) >= 200 {
			burst.run(ctx, j)
			return
		}
		if j.req.Node == "slow" {
			ended := hub.StartSlowWait(ctx)
			waiting.Add(1)
			<-release
			ended()
		}
		mu.Lock()
		order = append(order, jobNumber(j))
		mu.Unlock()
	}
	p := newRequestPool(context.Background(), maxPendingRequests, run)
	slow := requestWorkers + 4
	for i := range slow {
		p.submit(testJob(i, fmt.Sprintf("node\x00slow%d", i), opSubscribe, "slow", "u@localhost/a"))
	}
	testenv.WaitFor(t, 10*time.Second, "every slow job to be waiting", func() bool { return waiting.Load() == int32(slow) })
	// Behind the first slow job's node: waits for it.
	p.submit(testJob(100, "node\x00slow0", opRetract, "n", "u@localhost/a"))
	// Unrelated: runs now.
	p.submit(testJob(101, "", opRetract, "n", "u@localhost/a"))
	testenv.WaitFor(t, 10*time.Second, "a job to run beside the waiting ones", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) > 0
	})
	mu.Lock()
	if fmt.Sprint(order) != "[101]" {
		t.Errorf("while %d jobs wait, jobs done: %v; want [101]", slow, order)
	}
	mu.Unlock()
	close(release)
	testenv.WaitFor(t, 10*time.Second, "the waiting jobs to finish", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == slow+2
	})
	mu.Lock()
	if i100, i0 := slices.Index(order, 100), slices.Index(order, 0); i100 < i0 {
		t.Errorf("the job behind a waiting job's node ran before it: %v", order)
	}
	mu.Unlock()

	// The extra workers are gone: a burst runs requestWorkers at a time.
	for i := range 4 * requestWorkers {
		p.submit(testJob(200+i, "", opRetract, "n", "u@localhost/a"))
	}
	testenv.WaitFor(t, 10*time.Second, "a burst to fill the workers", func() bool { return burst.running.Load() >= requestWorkers })
	synctest.Wait() // an extra worker, were one started, would be running now
	if got := burst.running.Load(); got != requestWorkers {
		t.Errorf("%d jobs run at once after the slow waits ended; want %d", got, requestWorkers)
	}
	close(burst.hold)
	p.close()
}

// TestRequestPoolBoundsExtraWorkers: at most maxExtraWorkers workers are
// started in place of waiting ones; beyond that a waiting job keeps its
// worker. close waits for the waits to end.
func TestRequestPoolBoundsExtraWorkers(t *testing.T) {
	synctest.Test(t, testRequestPoolBoundsExtraWorkers)
}

func testRequestPoolBoundsExtraWorkers(t *testing.T) {
	release := make(chan struct{})
	var waiting atomic.Int32
	run := func(ctx context.Context, j *job) {
		ended := hub.StartSlowWait(ctx)
		waiting.Add(1)
		<-release
		ended()
	}
	p := newRequestPool(context.Background(), maxPendingRequests, run)
	most := requestWorkers + maxExtraWorkers
	for i := range most + 5 {
		p.submit(testJob(i, fmt.Sprintf("node\x00n%d", i), opSubscribe, "n", "u@localhost/a"))
	}
	testenv.WaitFor(t, 10*time.Second, "the workers to fill", func() bool { return waiting.Load() >= int32(most) })
	synctest.Wait() // a worker beyond the bound, were one started, would be waiting now
	if got := waiting.Load(); got != int32(most) {
		t.Errorf("%d jobs wait at once; want at most %d", got, most)
	}
	closed := make(chan struct{})
	go func() { p.close(); close(closed) }()
	synctest.Wait()
	select {
	case <-closed:
		t.Fatal("close returned while jobs wait")
	default:
	}
	close(release)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return once the waits ended")
	}
	if got := waiting.Load(); got != int32(most+5) {
		t.Errorf("%d jobs ran, want %d", got, most+5)
	}
}

func TestPayloadSetKeepsRecentWithinBudget(t *testing.T) {
	var s payloadSet
	big := make([]byte, payloadSetBudget/20)
	for i := range 40 {
		p := append([]byte(fmt.Sprintf("%03d", i)), big...)
		s.add(p)
		if !s.has(p) {
			t.Fatalf("payload %d not kept", i)
		}
	}
	if s.bytes > payloadSetBudget {
		t.Fatalf("%d bytes kept, budget %d", s.bytes, payloadSetBudget)
	}
	if s.has(append([]byte("000"), big...)) {
		t.Error("the oldest payload was not let go")
	}
	if s.has([]byte("never added")) {
		t.Error("has() of a payload never added")
	}
	s.add(make([]byte, payloadSetBudget)) // too big to keep
	if s.has(make([]byte, payloadSetBudget)) {
		t.Error("a payload beyond the size limit was kept")
	}
}
