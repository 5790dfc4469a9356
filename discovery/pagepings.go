package discovery

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/ratelimit"
	"github.com/pingd/pingd/internal/weblogs"
)

// Pings that name a homepage. weblogUpdates.ping, /ping and /pingSiteForm
// name a weblog's URL, which is often its homepage rather than its feed.
// The hub matches a ping against the sources' own URLs and their sites'
// URLs (the feed's channel link); when that finds nothing, PagePings looks
// at the page in the background for the feed it links to, and a followed
// feed found there is fetched. The ping itself is stored and answered
// first, as always; this only adds fetches.
//
// What a page led to is remembered (at most pageRemembered pages, each for
// pageForget): every later ping of the page makes those feeds due at once,
// through the fetcher's usual per-origin politeness, also when the page is
// not read again. The page itself is read at most once per pageRecheck;
// the look-ups are bounded in all (pageLookups at once) and per client
// address (one at a time, pageRequestsPerHour requests an hour, redirects
// included: internal/ratelimit's Lookups), so pings are never a way to make
// pingd fetch arbitrary pages at a high rate. A look-up refused for
// those bounds is not remembered as done: the next ping tries again.

const (
	pageRecheck    = 10 * time.Minute
	pageForget     = 24 * time.Hour
	pageRemembered = 10000
	pageTimeout    = 30 * time.Second
	pageLookups    = 2
	// pageLookupsPerAddress and pageRequestsPerHour bound one client
	// address (an IPv4 address, an IPv6 /64): a publisher pings its own
	// few pages, not hundreds an hour.
	pageLookupsPerAddress = 1
	pageRequestsPerHour   = 60
)

// pageMemo is what PagePings remembers of a page.
type pageMemo struct {
	// readAt is when the page was last read (or its reading began).
	readAt time.Time
	// feeds are the feeds (canonical URLs) it led to when last read.
	feeds   []string
	reading bool
}

// PagePings is the hub's ping listener that looks at the homepages weblog
// pings name when they matched no followed source.
type PagePings struct {
	base     context.Context
	stop     context.CancelFunc
	resolver hub.SourceResolver
	hub      *hub.Hub
	log      *slog.Logger
	lookups  *ratelimit.Lookups
	// running joins the look-ups and the fetches they set off, which use
	// the store: Close waits for them, so none outlives the store it
	// writes to.
	running sync.WaitGroup

	mu     sync.Mutex
	closed bool
	pages  map[string]*pageMemo
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
		lookups: ratelimit.NewLookups(ratelimit.LookupLimits{
			RequestsPerHour: pageRequestsPerHour, Concurrent: pageLookups,
			PerKey: pageLookupsPerAddress, Timeout: pageTimeout,
		}),
		pages: map[string]*pageMemo{}}
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

// PingRecorded makes the feeds the pinged page led to due, and reads the
// page again (in the background) when it was not read for pageRecheck, for
// a weblog ping that made no followed source due.
func (p *PagePings) PingRecorded(ctx context.Context, rec hub.PingRecord) {
	if rec.Matched > 0 || !weblogs.IsWeblogPing(rec.Ping.Dialect) || len(rec.URLs) == 0 {
		return
	}
	pageURL := rec.URLs[0]
	if c, err := hub.CanonicalURL(pageURL); err == nil {
		pageURL = c
	}
	feeds, ok := p.lookAt(pageURL, rec.Ping.Remote)
	if !ok {
		return
	}
	// A few store statements, like the ping's own: done here, so a ping
	// of a busy page cannot pile up goroutines.
	defer p.running.Done()
	p.changed(context.WithoutCancel(ctx), pageURL, feeds)
}

// lookAt starts a reading of pageURL for the client at remote when it is
// due and the bounds allow it, and returns the remembered feeds to make
// due now (ok: the caller must call running.Done when it has).
func (p *PagePings) lookAt(pageURL, remote string) ([]string, bool) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false
	}
	m := p.pages[pageURL]
	if m != nil && !m.reading && now.Sub(m.readAt) >= pageForget {
		delete(p.pages, pageURL)
		m = nil
	}
	if m == nil || (!m.reading && now.Sub(m.readAt) >= pageRecheck) {
		lk, err := p.lookups.Begin(p.base, ratelimit.ClientKey(remote), true)
		if err != nil {
			p.log.Debug("page of a ping not read now", "page", pageURL, "remote", remote, "err", err)
		} else {
			if m == nil {
				m = &pageMemo{}
				p.remember(pageURL, m, now)
			}
			m.readAt, m.reading = now, true
			// The feeds remembered are made due now, by the caller; the
			// reading makes due what it finds besides.
			marked := slices.Clone(m.feeds)
			// Added under mu, which Close takes before it waits: no
			// look-up starts unseen.
			p.running.Go(func() { p.read(lk, pageURL, m, marked) })
		}
	}
	if m == nil || len(m.feeds) == 0 {
		return nil, false
	}
	p.running.Add(1)
	return slices.Clone(m.feeds), true
}

// remember adds m for pageURL, making room when pageRemembered pages are
// remembered: the forgotten first, else some of the others.
func (p *PagePings) remember(pageURL string, m *pageMemo, now time.Time) {
	if len(p.pages) >= pageRemembered {
		for u, o := range p.pages {
			if !o.reading && now.Sub(o.readAt) >= pageForget {
				delete(p.pages, u)
			}
		}
		// Still full: drop a hundredth, in map order (random), so the
		// next additions do not scan again.
		for u, o := range p.pages {
			if len(p.pages) < pageRemembered-pageRemembered/100 {
				break
			}
			if !o.reading {
				delete(p.pages, u)
			}
		}
	}
	p.pages[pageURL] = m
}

// read reads the page in the look-up lk, remembers the feed it leads to,
// and makes it due unless it is among those made due already (marked).
func (p *PagePings) read(lk *ratelimit.Lookup, pageURL string, m *pageMemo, marked []string) {
	res, err := p.resolver.ResolveSource(lk.Context(), pageURL)
	// The requests are over: the address may read another page.
	lk.End()
	p.mu.Lock()
	m.reading = false
	switch {
	case err != nil:
		// Kept: a page that fails now led to those feeds before (made
		// due already, by the ping).
	case res.FromPage:
		feed := res.FeedURL
		if c, err := hub.CanonicalURL(feed); err == nil {
			feed = c
		}
		m.feeds = []string{feed}
	default:
		m.feeds = nil // the URL is a feed itself, followed by no node
	}
	var feeds []string
	for _, f := range m.feeds {
		if !slices.Contains(marked, f) {
			feeds = append(feeds, f)
		}
	}
	p.mu.Unlock()
	if err != nil && p.base.Err() == nil {
		p.log.Debug("read the page of a ping", "page", pageURL, "err", err)
	}
	if p.base.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(p.base, pageTimeout)
	defer cancel()
	p.changed(ctx, pageURL, feeds)
}

// changed makes the followed sources of feeds due.
func (p *PagePings) changed(ctx context.Context, pageURL string, feeds []string) {
	for _, feed := range feeds {
		n, err := p.hub.Changed(ctx, feed, nil)
		if err != nil {
			p.log.WarnContext(ctx, "fetch the feed of a pinged page", "page", pageURL, "feed", feed, "err", err)
			continue
		}
		if n > 0 {
			p.log.InfoContext(ctx, "ping of a homepage reaches its feed", "page", pageURL, "feed", feed, "sources", n)
		}
	}
}
