package delivery

import (
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/pingd/pingd/hub"
)

// Bounds of the delay before another try at a subscription whose host was
// busy.
const (
	minBusyDelay = 10 * time.Millisecond
	maxBusyDelay = time.Minute
)

// hostSlots bounds concurrent deliveries per receiver host and keeps a
// moving average of how long that host takes to answer. Slots live only
// while some delivery to that host runs; the averages of idle hosts are
// remembered in answers (a bounded map) for their next deliveries.
type hostSlots struct {
	mu  sync.Mutex
	max int
	// queueFor is how long a host's queue may take to drain, from its
	// answer times: a fast host may have many subscriptions waiting in
	// memory, a slow one few, so none waits until its lease runs out.
	queueFor time.Duration
	slots    map[string]*hostSlot
	answers  map[string]time.Duration
}

type hostSlot struct {
	busy  int
	avg   time.Duration
	queue []hostJob
	// since is when the host got busy: before its first answer, how long
	// it has kept us waiting is the best guess of its answer time.
	since time.Time
}

// hostJob is a claimed subscription waiting for its host.
type hostJob struct {
	sub     hub.Subscription
	batch   *batch
	claimed time.Time
}

// Bounds of the subscriptions waiting in memory for one busy host, per
// slot; beyond it they are put off in the store. A host whose answer
// times are not known yet gets the default.
const (
	defaultQueuedPerSlot = 16
	maxQueuedPerSlot     = 1024
	maxRememberedHosts   = 4096
)

// Outcomes of acquireOrEnqueue.
const (
	slotAcquired = iota
	slotQueued
	slotFull
)

// acquireOrEnqueue takes a slot for host if one is free, or else queues
// the job for the holders of the host's slots, if the queue has room.
func (h *hostSlots) acquireOrEnqueue(host string, job hostJob) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, found := h.slots[host]
	if !found {
		s = &hostSlot{avg: h.answers[host], since: time.Now()}
		h.slots[host] = s
	}
	switch {
	case s.busy < h.max:
		s.busy++
		return slotAcquired
	case len(s.queue) < h.queueLimit(s):
		s.queue = append(s.queue, job)
		return slotQueued
	}
	return slotFull
}

// queueLimit is how many subscriptions may wait for a host: as many as its
// slots serve in queueFor at its recent answer time.
func (h *hostSlots) queueLimit(s *hostSlot) int {
	perSlot := defaultQueuedPerSlot
	if s.avg > 0 {
		perSlot = int(min(int64(h.queueFor/s.avg), maxQueuedPerSlot))
	}
	return max(perSlot, 1) * h.max
}

// nextOrRelease records how long the host took for the job just done and
// hands the slot's holder the next queued job; with none queued it gives
// the slot back. Both under one lock, so no job is queued for a host whose
// last holder has just left.
func (h *hostSlots) nextOrRelease(host string, took time.Duration) (hostJob, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.slots[host]
	if s.avg == 0 {
		s.avg = took
	} else {
		s.avg = (4*s.avg + took) / 5
	}
	if len(s.queue) > 0 {
		job := s.queue[0]
		s.queue[0] = hostJob{}
		s.queue = s.queue[1:]
		return job, true
	}
	if s.busy--; s.busy == 0 {
		delete(h.slots, host)
		if len(h.answers) >= maxRememberedHosts {
			clear(h.answers) // forget them all rather than keep a list
		}
		h.answers[host] = s.avg
	}
	return hostJob{}, false
}

// busyDelay is how long to put off the subscriptions found waiting for a
// busy host whose queue is full: about when the host will have served
// half of its queue, from its recent answer times. All of them come back
// together, with one look at their node (Run schedules it), and those the
// queue cannot take then are put off again.
func (h *hostSlots) busyDelay(host string) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	var avg time.Duration
	queued := 0
	if s := h.slots[host]; s != nil {
		queued = len(s.queue)
	}
	switch s := h.slots[host]; {
	case s != nil && s.avg > 0:
		avg = s.avg
	case s != nil:
		// No answer yet: at least as long as it has been busy. Those put
		// off come back sooner than a guess of a second would bring them,
		// and are put off again, for longer, while it stays silent.
		avg = time.Since(s.since)
	default:
		avg = h.answers[host]
	}
	d := avg * time.Duration(1+queued/(2*h.max))
	return min(max(d, minBusyDelay), maxBusyDelay)
}

// hostOf is the receiver's origin, the key of the per-host limit: in
// canonical form (hub.HostKey), so one host spelled several ways (a
// zero-padded port, a trailing dot) is one host.
func hostOf(raw string) string {
	if key := hub.HostKey(raw); key != "" {
		return key
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return strings.ToLower(u.Host)
}
