package httpapi

import (
	"context"
	"sync"
	"time"

	"github.com/pingd/pingd/hub"
)

// Pings that name a homepage. weblogUpdates.ping, /ping and /pingSiteForm
// name a weblog's URL, which is often its homepage rather than its feed.
// The hub matches a ping against the sources' own URLs and their sites'
// URLs (the feed's channel link); when that finds nothing, the page is
// looked at in the background for the feed it links to, and a followed
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

type pagePings struct {
	resolver hub.SourceResolver
	hub      *hub.Hub
	api      *API
	slots    chan struct{}

	mu     sync.Mutex
	looked map[string]time.Time
}

func newPagePings(a *API, r hub.SourceResolver) *pagePings {
	if r == nil {
		return nil
	}
	return &pagePings{resolver: r, hub: a.hub, api: a, slots: make(chan struct{}, pageLookups), looked: map[string]time.Time{}}
}

// lookAt queues a look at pageURL unless it was looked at recently or
// every lookup slot is busy.
func (p *pagePings) lookAt(pageURL string) {
	if p == nil {
		return
	}
	now := time.Now()
	p.mu.Lock()
	if t, ok := p.looked[pageURL]; ok && now.Sub(t) < pageRecheck {
		p.mu.Unlock()
		return
	}
	if len(p.looked) >= pageRemembered {
		for u, t := range p.looked {
			if now.Sub(t) >= pageRecheck {
				delete(p.looked, u)
			}
		}
		if len(p.looked) >= pageRemembered {
			p.mu.Unlock()
			return
		}
	}
	p.looked[pageURL] = now
	p.mu.Unlock()
	select {
	case p.slots <- struct{}{}:
	default:
		return
	}
	go func() {
		defer func() { <-p.slots }()
		ctx, cancel := context.WithTimeout(context.Background(), pageTimeout)
		defer cancel()
		res, err := p.resolver.ResolveSource(ctx, pageURL)
		if err != nil || !res.FromPage {
			return
		}
		n, err := p.hub.Changed(ctx, res.FeedURL, nil)
		if err != nil {
			p.api.log.WarnContext(ctx, "fetch the feed of a pinged page", "page", pageURL, "feed", res.FeedURL, "err", err)
			return
		}
		if n > 0 {
			p.api.log.InfoContext(ctx, "ping of a homepage reaches its feed", "page", pageURL, "feed", res.FeedURL, "sources", n)
		}
	}()
}
