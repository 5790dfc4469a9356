package component

import (
	"context"
	"encoding/xml"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/hub"
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
	return &job{key: key, iq: el, req: &request{Op: op, Node: node, HasNode: node != ""}, from: jid.MustParse(from)}
}

func TestRequestPoolOrderPerKeyAndConcurrency(t *testing.T) {
	rec := newPoolRecorder()
	p := newRequestPool(context.Background(), rec.run)
	ctx := context.Background()
	const perKey = 40
	keys := []string{"node\x00a", "node\x00b", "node\x00c", ""}
	n := 0
	for i := range perKey {
		for _, k := range keys {
			n++
			// Retracts never batch: every job runs on its own.
			if !p.submit(ctx, testJob(n, k, opRetract, k, fmt.Sprintf("u%d@localhost/r", i))) {
				t.Fatal("submit refused")
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
	p := newRequestPool(context.Background(), rec.run)
	ctx := context.Background()
	key := "node\x00news"
	// The first publish runs (and waits); the rest queue behind it.
	p.submit(ctx, testJob(1, key, opPublish, "news", "owner@localhost/a"))
	for i := 2; i <= 6; i++ {
		p.submit(ctx, testJob(i, key, opPublish, "news", "owner@localhost/a"))
	}
	// A publish by someone else and a retract are not batched with them,
	// and what follows them waits its turn.
	p.submit(ctx, testJob(7, key, opPublish, "news", "other@localhost/a"))
	p.submit(ctx, testJob(8, key, opRetract, "news", "owner@localhost/a"))
	p.submit(ctx, testJob(9, key, opPublish, "news", "owner@localhost/b"))
	p.submit(ctx, testJob(10, key, opPublish, "news", "owner@localhost/c"))
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
	p := newRequestPool(context.Background(), rec.run)
	for i := range maxPendingRequests {
		p.submit(context.Background(), testJob(i, "", opRetract, "", "u@localhost"))
	}
	// The pool is full: the next submission waits, and gives up with its
	// context.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if p.submit(ctx, testJob(maxPendingRequests, "", opRetract, "", "u@localhost")) {
		t.Fatal("a full pool took another job")
	}
	close(rec.hold)
	p.close()
	if len(rec.runs) != maxPendingRequests {
		t.Fatalf("%d jobs ran, want %d", len(rec.runs), maxPendingRequests)
	}
}

// TestRequestPoolRunsOthersWhileJobsWaitSlowly: jobs that report a slow
// wait (a baseline fetch) do not hold the pool: more of them than there are
// workers wait at once and other jobs still run; the requests queued behind
// a waiting job's node still wait for it; once they are done, no more than
// requestWorkers jobs run at once again.
func TestRequestPoolRunsOthersWhileJobsWaitSlowly(t *testing.T) {
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
	p := newRequestPool(context.Background(), run)
	ctx := context.Background()
	slow := requestWorkers + 4
	for i := range slow {
		p.submit(ctx, testJob(i, fmt.Sprintf("node\x00slow%d", i), opSubscribe, "slow", "u@localhost/a"))
	}
	waitFor(t, 10*time.Second, "every slow job to be waiting", func() bool { return waiting.Load() == int32(slow) })
	// Behind the first slow job's node: waits for it.
	p.submit(ctx, testJob(100, "node\x00slow0", opRetract, "n", "u@localhost/a"))
	// Unrelated: runs now.
	p.submit(ctx, testJob(101, "", opRetract, "n", "u@localhost/a"))
	waitFor(t, 10*time.Second, "a job to run beside the waiting ones", func() bool {
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
	waitFor(t, 10*time.Second, "the waiting jobs to finish", func() bool {
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
		p.submit(ctx, testJob(200+i, "", opRetract, "n", "u@localhost/a"))
	}
	waitFor(t, 10*time.Second, "a burst to fill the workers", func() bool { return burst.running.Load() >= requestWorkers })
	time.Sleep(50 * time.Millisecond) // room for an extra worker to show up
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
	release := make(chan struct{})
	var waiting atomic.Int32
	run := func(ctx context.Context, j *job) {
		ended := hub.StartSlowWait(ctx)
		waiting.Add(1)
		<-release
		ended()
	}
	p := newRequestPool(context.Background(), run)
	most := requestWorkers + maxExtraWorkers
	for i := range most + 5 {
		p.submit(context.Background(), testJob(i, fmt.Sprintf("node\x00n%d", i), opSubscribe, "n", "u@localhost/a"))
	}
	waitFor(t, 10*time.Second, "the workers to fill", func() bool { return waiting.Load() == int32(most) })
	time.Sleep(50 * time.Millisecond) // room for a worker beyond the bound to show up
	if got := waiting.Load(); got != int32(most) {
		t.Errorf("%d jobs wait at once; want at most %d", got, most)
	}
	closed := make(chan struct{})
	go func() { p.close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("close returned while jobs wait")
	case <-time.After(50 * time.Millisecond):
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
