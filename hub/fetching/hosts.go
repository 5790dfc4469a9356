package fetching

import (
	"time"

	"github.com/pingd/pingd/hub"
)

// Politeness towards origin hosts. The fetch loop hands a claimed source
// to its host (HostKey: host and port), and a worker is taken only when
// the host may be fetched now: fewer than FetchesPerHost of its fetches
// run, FetchHostSpacing has passed since its last one started, and it has
// not asked to be left alone (a 429 or 503). So a slow or busy host holds
// at most its own slots, never a worker waiting for it. Each host keeps
// waiting what it will start soon at its pace; the ones claimed beyond
// that are given back due later, spread at that pace, so that a host with
// thousands of due feeds does not fill the claims of the others, and the
// sources waiting for a busy host do not count against the next claim.
//
// fetchHosts belongs to the fetch loop's goroutine alone: no lock.

// Host pauses after a 429 or 503 from a host: its other sources wait too.
const (
	// DefaultHostPause is how long a host that answered 429 or 503 without
	// Retry-After is left alone.
	DefaultHostPause = time.Minute
	// MaxHostPause bounds what a Retry-After makes the host's other
	// sources wait; the source that got it waits as long as it says, up
	// to maxRetryAfterWait. One feed's answer does not stop a whole host
	// for days.
	MaxHostPause = time.Hour
)

type fetchHosts struct {
	perHost int
	spacing time.Duration
	hosts   map[string]*fetchHost
	// ready are the hosts with sources waiting.
	ready map[string]*fetchHost
	// waiting counts the sources waiting over every host.
	waiting int
}

type fetchHost struct {
	key     string
	running int
	waiting []hub.Source
	// nextStart: no fetch of the host starts before it (spacing).
	nextStart time.Time
	// pausedUntil: the host asked to be left alone until then.
	pausedUntil time.Time
	// deferredUntil is the latest due time given to a source of the host
	// given back because the host was busy: the next one goes after it.
	deferredUntil time.Time
	// took is the host's recent fetch duration (a moving average), its
	// pace when it is fetched back to back.
	took time.Duration
}

func newFetchHosts(perHost int, spacing time.Duration) *fetchHosts {
	return &fetchHosts{perHost: perHost, spacing: max(spacing, 0),
		hosts: map[string]*fetchHost{}, ready: map[string]*fetchHost{}}
}

func (f *fetchHosts) host(key string) *fetchHost {
	fh, ok := f.hosts[key]
	if !ok {
		fh = &fetchHost{key: key}
		f.hosts[key] = fh
	}
	return fh
}

// readyAt is when the host may next be fetched, slots aside.
func (fh *fetchHost) readyAt() time.Time {
	if fh.pausedUntil.After(fh.nextStart) {
		return fh.pausedUntil
	}
	return fh.nextStart
}

// admit takes a claimed source: it waits for its host, or admit says when
// to give it back and why. A host keeps waiting what it will start within
// about half the fetch timeout at its pace (at least FetchesPerHost, at
// most maxHostWaiting); the rest is due again spread at that pace, after
// what was given back before.
func (f *fetchHosts) admit(src hub.Source, now time.Time, fetchTimeout time.Duration) (at time.Time, reason string, queued bool) {
	fh := f.host(hub.HostKey(src.URL))
	if fh.pausedUntil.After(now) {
		return fh.pausedUntil, hub.ReasonHostPaused, false
	}
	pace := f.pace(fh)
	if len(fh.waiting) < min(max(int(fetchTimeout/(2*pace)), f.perHost), maxHostWaiting) {
		fh.waiting = append(fh.waiting, src)
		f.ready[fh.key] = fh
		f.waiting++
		return time.Time{}, "", true
	}
	at = fh.readyAt()
	if now.After(at) {
		at = now
	}
	at = at.Add(time.Duration(len(fh.waiting)) * pace)
	if fh.deferredUntil.After(at) {
		at = fh.deferredUntil
	}
	at = at.Add(pace)
	fh.deferredUntil = at
	return at, hub.ReasonHostBusy, false
}

// maxHostWaiting bounds the sources one host keeps waiting.
const maxHostWaiting = 16

// startable counts the waiting sources that could start now, their host
// having a free slot and its spacing and pause behind it: those a worker
// is about to take. Sources waiting for a busy host are not counted, so
// they do not stop the loop from claiming for the other hosts.
func (f *fetchHosts) startable(now time.Time) int {
	n := 0
	for _, fh := range f.ready {
		if fh.readyAt().After(now) || fh.running >= f.perHost {
			continue
		}
		k := min(len(fh.waiting), f.perHost-fh.running)
		if f.spacing > 0 {
			k = min(k, 1)
		}
		n += k
	}
	return n
}

// pace is the time between two fetches of the host when it is fetched
// back to back: the spacing, or its fetches' duration shared by its slots,
// at least a millisecond.
func (f *fetchHosts) pace(fh *fetchHost) time.Duration {
	return max(f.spacing, fh.took/time.Duration(f.perHost), time.Millisecond)
}

// next pops a source that may be fetched now, taking a slot of its host;
// false when none may. Sources that waited so long that their lease would
// run out before their fetch ends (their host slow) are returned in
// expired, to be given back.
func (f *fetchHosts) next(now time.Time, fetchTimeout time.Duration) (src hub.Source, ok bool, expired []hub.Source) {
	for key, fh := range f.ready {
		for len(fh.waiting) > 0 && fh.waiting[0].LeaseUntil.Before(now.Add(fetchTimeout)) {
			expired = append(expired, fh.waiting[0])
			f.pop(fh)
		}
		if len(fh.waiting) == 0 {
			delete(f.ready, key)
			continue
		}
		if fh.running >= f.perHost || fh.readyAt().After(now) {
			continue
		}
		src = fh.waiting[0]
		f.pop(fh)
		if len(fh.waiting) == 0 {
			delete(f.ready, key)
		}
		fh.running++
		fh.nextStart = now.Add(f.spacing)
		return src, true, expired
	}
	return hub.Source{}, false, expired
}

func (f *fetchHosts) pop(fh *fetchHost) {
	fh.waiting[0] = hub.Source{} // nothing kept alive by the backing array
	fh.waiting = fh.waiting[1:]
	f.waiting--
}

// wakeAt is the earliest time a waiting source's host will be ready by
// spacing or pause; zero when none waits for time (only for slots).
func (f *fetchHosts) wakeAt(now time.Time) time.Time {
	var at time.Time
	for _, fh := range f.ready {
		if fh.running >= f.perHost {
			continue
		}
		if r := fh.readyAt(); r.After(now) && (at.IsZero() || r.Before(at)) {
			at = r
		}
	}
	return at
}

// finished ends a fetch of host key that took `took`; pause, when set, is
// how long the host asked to be left alone. It returns the sources that
// waited for the host and must now be given back, due at the pause's end.
func (f *fetchHosts) finished(key string, took time.Duration, pause, now time.Time) (giveBack []hub.Source, at time.Time) {
	fh := f.host(key)
	fh.running--
	if fh.took == 0 {
		fh.took = took
	} else {
		fh.took = (3*fh.took + took) / 4
	}
	if pause.After(fh.pausedUntil) {
		fh.pausedUntil = pause
	}
	if fh.pausedUntil.After(now) && len(fh.waiting) > 0 {
		giveBack = fh.waiting
		f.waiting -= len(fh.waiting)
		fh.waiting = nil
		delete(f.ready, key)
	}
	return giveBack, fh.pausedUntil
}

// forget drops the hosts that have nothing running or waiting and whose
// times have passed: the map holds only hosts with something to remember.
func (f *fetchHosts) forget(now time.Time) {
	for key, fh := range f.hosts {
		if fh.running == 0 && len(fh.waiting) == 0 && !fh.readyAt().After(now) && !fh.deferredUntil.After(now) {
			delete(f.hosts, key)
		}
	}
}

// paused counts the hosts that asked to be left alone, as of now.
func (f *fetchHosts) paused(now time.Time) int {
	n := 0
	for _, fh := range f.hosts {
		if fh.pausedUntil.After(now) {
			n++
		}
	}
	return n
}

// drain removes and returns every waiting source (shutdown).
func (f *fetchHosts) drain() []hub.Source {
	var out []hub.Source
	for key, fh := range f.ready {
		out = append(out, fh.waiting...)
		f.waiting -= len(fh.waiting)
		fh.waiting = nil
		delete(f.ready, key)
	}
	return out
}

// hostPause is until when a host that answered a fetch with status (and
// Retry-After retryAfter, zero if none) is left alone; zero when the
// answer asks for no pause.
func hostPause(status int, retryAfter, now time.Time) time.Time {
	if status != 429 && status != 503 {
		return time.Time{}
	}
	if retryAfter.IsZero() || !retryAfter.After(now) {
		return now.Add(DefaultHostPause)
	}
	if limit := now.Add(MaxHostPause); retryAfter.After(limit) {
		return limit
	}
	return retryAfter
}
