package upstream

import (
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	"github.com/pingd/pingd/discovery"
	"github.com/pingd/pingd/hub"
)

// Tracker is the hub's scheduler, wrapped: after each fetch it notes what
// the feed advertises, and it polls sources with an active push only as a
// safety net.
type Tracker struct {
	inner      hub.Scheduler
	safetyPoll time.Duration
	onAdvert   func()

	mu sync.Mutex
	// active are the sources with a push subscription in force.
	active map[int64]bool
	// adverts wait for the manager; seen remembers the last body looked
	// at per source, so an unchanged feed is not parsed again.
	adverts map[int64]advert
	seen    map[int64][32]byte
	// known keeps the latest advertisement of every source, for sources
	// whose first subscriber comes after the fetch that found it.
	known map[int64]advert
}

// advert is what one fetched feed advertises.
type advert struct {
	sourceID         int64
	feedURL          string
	hub, self, cloud string
	bodyHash         [32]byte
}

// DefaultSafetyPoll is how often a source with an active push is polled.
const DefaultSafetyPoll = 6 * time.Hour

// NewTracker wraps inner. safetyPoll 0 takes DefaultSafetyPoll.
func NewTracker(inner hub.Scheduler, safetyPoll time.Duration) *Tracker {
	if safetyPoll <= 0 {
		safetyPoll = DefaultSafetyPoll
	}
	return &Tracker{inner: inner, safetyPoll: safetyPoll, active: map[int64]bool{}, adverts: map[int64]advert{}, seen: map[int64][32]byte{}, known: map[int64]advert{}}
}

// ReasonSafetyNet is the NextFetchReason of a source whose push is active.
const ReasonSafetyNet = "upstream push active: safety-net poll"

// Next implements hub.Scheduler.
func (t *Tracker) Next(now time.Time, src *hub.Source, res *hub.FetchResult, err error) (time.Time, string) {
	next, reason := t.inner.Next(now, src, res, err)
	if res != nil && len(res.Body) > 0 && (res.IsFeed || headerHub(res) != "") {
		t.note(src, res)
	}
	t.mu.Lock()
	active := t.active[src.ID]
	t.mu.Unlock()
	if active && err == nil && (res == nil || !res.Gone) {
		if safety := now.Add(t.safetyPoll); next.Before(safety) {
			next, reason = safety, ReasonSafetyNet
		}
	}
	return next, reason
}

// note reads a changed answer for its push links: the hub and self URL
// of its Link header (WebSub §4; these win, as WebSub's discovery order
// has it), then those of the feed body, and the body's rssCloud cloud.
// A resource that is not a feed can have a hub only in its headers.
func (t *Tracker) note(src *hub.Source, res *hub.FetchResult) {
	sum := advertHash(res)
	t.mu.Lock()
	if t.seen[src.ID] == sum {
		t.mu.Unlock()
		return
	}
	t.seen[src.ID] = sum
	t.mu.Unlock()
	feedURL := src.URL
	ad := advert{sourceID: src.ID, feedURL: feedURL, hub: headerHub(res), bodyHash: sum}
	for _, l := range res.Links {
		if ad.self == "" && slices.Contains(l.Rels, "self") {
			ad.self = l.URL
		}
	}
	if res.IsFeed {
		if f := discovery.FromFeed(feedURL, res.Body); f != nil {
			if ad.hub == "" && len(f.Hubs) > 0 {
				ad.hub = f.Hubs[0]
			}
			if ad.self == "" {
				ad.self = f.Self
			}
			for _, c := range f.Clouds {
				if e := cloudEndpoint(c); e != "" {
					ad.cloud = e
					break
				}
			}
		}
	}
	if ad.hub == "" && ad.cloud == "" {
		t.mu.Lock()
		delete(t.known, src.ID)
		t.mu.Unlock()
		return
	}
	t.mu.Lock()
	t.adverts[src.ID] = ad
	t.known[src.ID] = ad
	wake := t.onAdvert
	t.mu.Unlock()
	if wake != nil {
		wake()
	}
}

// headerHub is the first hub of an answer's Link header.
func headerHub(res *hub.FetchResult) string {
	for _, l := range res.Links {
		if slices.Contains(l.Rels, "hub") {
			return l.URL
		}
	}
	return ""
}

// advertHash identifies what an answer advertises: its body and its
// header links.
func advertHash(res *hub.FetchResult) [32]byte {
	h := sha256.New()
	h.Write(res.Body)
	for _, l := range res.Links {
		h.Write([]byte{0})
		h.Write([]byte(l.URL))
		for _, r := range l.Rels {
			h.Write([]byte{' '})
			h.Write([]byte(r))
		}
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// takeAdverts hands the manager what was noted since the last pass.
func (t *Tracker) takeAdverts() []advert {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]advert, 0, len(t.adverts))
	for _, a := range t.adverts {
		out = append(out, a)
	}
	clear(t.adverts)
	return out
}

// knownAdverts returns the latest advertisement of each source in ids
// that has one.
func (t *Tracker) knownAdverts(without map[int64]bool) []advert {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []advert
	for id, a := range t.known {
		if !without[id] {
			out = append(out, a)
		}
	}
	return out
}

// forget makes the next fetch of a source be looked at again (after a
// subscription failed or ended).
func (t *Tracker) forget(sourceID int64) {
	t.mu.Lock()
	delete(t.seen, sourceID)
	t.mu.Unlock()
}

// setActive records which sources have a push in force.
func (t *Tracker) setActive(ups []hub.Upstream) {
	active := make(map[int64]bool, len(ups))
	for _, u := range ups {
		if u.State == hub.UpstreamActive {
			active[u.SourceID] = true
		}
	}
	t.mu.Lock()
	t.active = active
	t.mu.Unlock()
}

// activate records a push that came into force.
func (t *Tracker) activate(sourceID int64) {
	t.mu.Lock()
	t.active[sourceID] = true
	t.mu.Unlock()
}

// Active reports whether a push is in force for the source.
func (t *Tracker) Active(sourceID int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.active[sourceID]
}
