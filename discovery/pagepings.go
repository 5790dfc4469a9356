package discovery

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/weblogs"
)

// Pings that name a homepage. weblogUpdates.ping, /ping and /pingSiteForm
// name a weblog's URL, which is often its homepage rather than its feed.
// The hub matches a ping against the sources' own URLs and their sites'
// URLs (the feed's channel link); when that finds nothing, PagePings looks
// at the page in the background for the feed it links to, and a followed
// feed found there is fetched. The ping itself is stored and answered
// first, as always; this only adds fetches. A page is looked at once per
// pageRecheck, and at most pageLookups at once: it is never a way to make
// pingd fetch arbitrary pages at a high rate.

const (
	pageRecheck    = 10 * time.Minute
	pageLookups    = 2
	pageRemembered = 10000
	pageTimeout    = 30 * time.Second
)

// PagePings is the hub's ping listener that looks at the homepages weblog
// pings name when they matched no followed source.
type PagePings struct {
	base     context.Context
	stop     context.CancelFunc
	resolver hub.SourceResolver
	hub      *hub.Hub
	log      *slog.Logger
	slots    chan struct{}
	// running joins the look-ups, which use the store: Close waits for
	// them, so none outlives the store it writes to.
	running sync.WaitGroup

	mu     sync.Mutex
	closed bool
	looked map[string]time.Time
}

// NewPagePings returns the listener; look-ups end when base does or Close
// is called. cmd/pingd registers it with Hub.AddPingListener and closes
// it before the store.
func NewPagePings(base context.Context, h *hub.Hub, r hub.SourceResolver, log *slog.Logger) *PagePings {
	if log == nil {
		log = slog.Default()
	}
	base, stop := context.WithCancel(base)
	return &PagePings{base: base, stop: stop, resolver: r, hub: h, log: log,
		slots: make(chan struct{}, pageLookups), looked: map[string]time.Time{}}
}

// Close ends the look-ups under way and returns once none runs; pings
// recorded afterwards start none.
func (p *PagePings) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.stop()
	p.running.Wait()
}

// PingRecorded looks at the page of a weblog ping that made no followed
// source due.
func (p *PagePings) PingRecorded(_ context.Context, rec hub.PingRecord) {
	if rec.Matched > 0 || !weblogs.IsWeblogPing(rec.Ping.Dialect) || len(rec.URLs) == 0 {
		return
	}
	p.lookAt(rec.URLs[0])
}

// lookAt queues a look at pageURL unless it was looked at recently or
// every lookup slot is busy.
func (p *PagePings) lookAt(pageURL string) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if t, ok := p.looked[pageURL]; ok && now.Sub(t) < pageRecheck {
		return
	}
	if len(p.looked) >= pageRemembered {
		for u, t := range p.looked {
			if now.Sub(t) >= pageRecheck {
				delete(p.looked, u)
			}
		}
		if len(p.looked) >= pageRemembered {
			return
		}
	}
	p.looked[pageURL] = now
	select {
	case p.slots <- struct{}{}:
	default:
		return
	}
	// Added under mu, which Close takes before it waits: no look-up
	// starts unseen.
	p.running.Go(func() {
		defer func() { <-p.slots }()
		ctx, cancel := context.WithTimeout(p.base, pageTimeout)
		defer cancel()
		res, err := p.resolver.ResolveSource(ctx, pageURL)
		if err != nil || !res.FromPage {
			return
		}
		n, err := p.hub.Changed(ctx, res.FeedURL, nil)
		if err != nil {
			p.log.WarnContext(ctx, "fetch the feed of a pinged page", "page", pageURL, "feed", res.FeedURL, "err", err)
			return
		}
		if n > 0 {
			p.log.InfoContext(ctx, "ping of a homepage reaches its feed", "page", pageURL, "feed", res.FeedURL, "sources", n)
		}
	})
}
