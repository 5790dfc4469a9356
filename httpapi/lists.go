package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/weblogs"
)

// The ping lists — /changes.xml, /shortChanges.xml and the hourly
// archives — are polled by many readers at once, and each can name
// thousands of pings: rendered per request, a crowd of readers held every
// read connection of the store and the CPU, and health checks timed out
// behind them. So:
//
//   - a list is read from the store at most once per listInterval and
//     every request in between is served from that reading; a document is
//     rendered once per reading (its gzip form once too, when asked for),
//     and a rendering carries an ETag for 304s;
//   - one list query runs on the store at a time, whatever the number of
//     lists asked for, so the lists never hold more than one of its
//     connections; a request waits at most listWait for its list;
//   - a document holds at most listMaxEntries pings, the newest, in at
//     most listMaxBytes; "count" still says how many pings came in;
//   - readers are limited per client IP (ListsConfig.ListRate, ListBurst).
//
// Views filtered by ?tag= are rendered per request from the kept reading,
// never from the store: tags are the readers' choice, and a rendering per
// tag kept in memory would let them fill it.
const (
	// listInterval is how long one reading of a list serves: the lists
	// count minutes ("when"), and shortChanges.xml spans five of them, so
	// ten seconds of staleness go unnoticed while a crowd of readers costs
	// one query per list every ten seconds.
	listInterval = 10 * time.Second
	// listMaxEntries caps a document at the newest 2,000 pings: a ping every
	// 1.8 s for changes.xml's hour, every 0.15 s for shortChanges.xml's five
	// minutes, far beyond what one pingd's per-URL limits let through in
	// normal use. An hour with more keeps its newest in its archive.
	listMaxEntries = 2000
	// listMaxBytes caps a document: 2,000 entries of usual names and URLs
	// take about 250 KB; the cap only binds when pings carry long names and
	// URLs (1 KiB names and 2 KiB URLs are allowed), so a document stays
	// cheap to send however the pings were chosen.
	listMaxBytes = 1 << 20
	// listMaxCached bounds the readings kept: the two recent lists share
	// one, and each archived hour asked for has its own.
	listMaxCached = 16
	// listWait bounds a request's wait for its list: the store's query
	// timeout plus a queue of other lists' queries.
	listWait = 10 * time.Second
)

// errListsBusy: the list query could not start within listWait.
var errListsBusy = errors.New("the ping lists are busy; try again shortly")

// listCache keeps the latest reading of each ping list.
type listCache struct {
	// slot admits one list query on the store at a time.
	slot chan struct{}

	mu    sync.Mutex
	lists map[string]*pingList
}

func newListCache() *listCache {
	return &listCache{slot: make(chan struct{}, 1), lists: map[string]*pingList{}}
}

// listLoader reads a list's pings from the store as of at: the newest
// first, at most listMaxEntries, and the number of pings ever received.
type listLoader func(ctx context.Context, at time.Time) ([]hub.Ping, int64, error)

// pingList is one reading of a list.
type pingList struct {
	// at is the hub's time of the reading: the lists' "updated".
	at time.Time
	// ready is closed once entries, total and err are set.
	ready   chan struct{}
	entries []weblogEntry
	total   int64
	err     error

	mu   sync.Mutex
	docs map[string]*listDoc // renderings without a tag, by view
}

// weblogEntry is a ping as the lists show it, its name and URLs already
// escaped for an attribute value: url is the URL the ping submitted,
// rssURL the feed an extendedPing named ("" for other pings).
type weblogEntry struct {
	id                int64
	received          time.Time
	tags              []string
	name, url, rssURL string
}

// fresh says whether the reading may serve a request at now; a clock set
// back makes it stale too.
func (l *pingList) fresh(now time.Time) bool {
	return !now.Before(l.at) && now.Sub(l.at) < listInterval
}

func (l *pingList) loaded() bool {
	select {
	case <-l.ready:
		return true
	default:
		return false
	}
}

// expires is the time after which the reading is no longer served.
func (l *pingList) expires() time.Time { return l.at.Add(listInterval) }

// list returns the reading of key that serves a request at now, reading
// it with load when none does. Requests that find a reading under way
// wait for it.
func (c *listCache) list(ctx context.Context, key string, now time.Time, load listLoader) (*pingList, error) {
	c.mu.Lock()
	l, ok := c.lists[key]
	leader := !ok || !l.fresh(now)
	if leader {
		c.evict(now)
		l = &pingList{at: now, ready: make(chan struct{}), docs: map[string]*listDoc{}}
		c.lists[key] = l
	}
	c.mu.Unlock()
	if leader {
		c.fill(ctx, key, l, load)
	}
	select {
	case <-l.ready:
		return l, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fill reads the list for every request waiting on l.
func (c *listCache) fill(ctx context.Context, key string, l *pingList, load listLoader) {
	// The reading serves others too: the first requester going away does
	// not cancel it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), listWait)
	defer cancel()
	var pings []hub.Ping
	select {
	case c.slot <- struct{}{}:
		pings, l.total, l.err = load(ctx, l.at)
		<-c.slot
	case <-ctx.Done():
		l.err = errListsBusy
	}
	if l.err == nil {
		l.entries = weblogEntries(pings)
	} else {
		// A failed reading is not kept: the next request tries again.
		c.mu.Lock()
		if c.lists[key] == l {
			delete(c.lists, key)
		}
		c.mu.Unlock()
	}
	close(l.ready)
}

// evict drops readings that no longer serve, then the oldest ones while
// too many are kept. Readings under way stay. Called with c.mu held.
func (c *listCache) evict(now time.Time) {
	for k, l := range c.lists {
		if l.loaded() && !l.fresh(now) {
			delete(c.lists, k)
		}
	}
	for len(c.lists) >= listMaxCached {
		oldest := ""
		for k, l := range c.lists {
			if l.loaded() && (oldest == "" || l.at.Before(c.lists[oldest].at)) {
				oldest = k
			}
		}
		if oldest == "" {
			return
		}
		delete(c.lists, oldest)
	}
}

// weblogEntries escapes the pings, newest first, keeping as many as fit
// listMaxBytes whatever the view and its "when" values.
func weblogEntries(pings []hub.Ping) []weblogEntry {
	if len(pings) > listMaxEntries {
		pings = pings[:listMaxEntries]
	}
	out := make([]weblogEntry, 0, len(pings))
	size := weblogs.HeaderSizeMax
	var b bytes.Buffer
	escaped := func(s string) string {
		b.Reset()
		weblogs.EscapeAttr(&b, s)
		return b.String()
	}
	for _, p := range pings {
		e := weblogEntry{id: p.ID, received: p.ReceivedAt, tags: p.Tags, name: escaped(p.Name), url: escaped(p.URL)}
		if p.FeedURL != "" {
			e.rssURL = escaped(p.FeedURL)
		}
		size += weblogs.EntrySizeMax + len(e.name) + len(e.url) + len(e.rssURL)
		if size > listMaxBytes {
			break
		}
		out = append(out, e)
	}
	return out
}

// listView is what one document shows of a reading.
type listView struct {
	// name tells the view's renderings apart within a reading.
	name string
	// since leaves out pings received before it (zero: none).
	since time.Time
	// updated is the document's "updated"; "when" counts back from it.
	updated time.Time
	// countAll: "count" is the number of pings ever received (changes.xml
	// and shortChanges.xml without a tag); else the number listed.
	countAll bool
}

// listDoc is a rendered document.
type listDoc struct {
	body []byte
	// tag is the opaque part of the entity tag, without quotes.
	tag string

	gzOnce sync.Once
	gz     []byte
}

// gzipped is the body gzip-encoded, made on the first call.
func (d *listDoc) gzipped() []byte {
	d.gzOnce.Do(func() {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(d.body) // a bytes.Buffer does not fail
		_ = zw.Close()
		d.gz = b.Bytes()
	})
	return d.gz
}

// doc renders the view of the reading filtered by tag (case-insensitive;
// none when empty). Renderings without a tag are made once and kept.
func (l *pingList) doc(v listView, tag string) *listDoc {
	if tag != "" {
		return renderWeblogs(l.entries, v, tag, l.total)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.docs[v.name]
	if d == nil {
		d = renderWeblogs(l.entries, v, "", l.total)
		l.docs[v.name] = d
	}
	return d
}

// renderWeblogs writes the weblogs.com document of the view's entries
// (internal/weblogs writes the document's parts). Its entity tag covers
// everything in it but "updated".
func renderWeblogs(entries []weblogEntry, v listView, tag string, total int64) *listDoc {
	listed := make([]weblogEntry, 0, len(entries))
	for _, e := range entries {
		if !v.since.IsZero() && e.received.Before(v.since) {
			continue
		}
		if tag != "" && !carriesTag(e.tags, tag) {
			continue
		}
		listed = append(listed, e)
	}
	count := total
	if !v.countAll || tag != "" {
		count = int64(len(listed))
	}
	var b bytes.Buffer
	sum := sha256.New()
	fmt.Fprintf(sum, "%d\n", count)
	weblogs.WriteStart(&b, v.updated, count)
	for _, e := range listed {
		when := max(int64(v.updated.Sub(e.received)/time.Minute), 0)
		weblogs.WriteWeblog(&b, e.name, e.url, e.rssURL, when)
		fmt.Fprintf(sum, "%d %d %q %q %q\n", e.id, when, e.name, e.url, e.rssURL)
	}
	weblogs.WriteEnd(&b)
	return &listDoc{body: b.Bytes(), tag: base64.RawURLEncoding.EncodeToString(sum.Sum(nil)[:18])}
}

// carriesTag reports whether tags holds tag, case-insensitively.
func carriesTag(tags []string, tag string) bool {
	for _, t := range tags {
		if strings.EqualFold(t, tag) {
			return true
		}
	}
	return false
}

// allowList takes a token from the client's list-reading bucket,
// answering 429 itself when there is none.
func (a *Lists) allowList(w http.ResponseWriter, r *http.Request) bool {
	key := clientKey(r)
	if ok, wait := a.limit.Allow(key, time.Now()); !ok {
		setRetryAfter(w, wait)
		writeText(w, http.StatusTooManyRequests, "too many requests for the ping lists from "+key+"; retry later")
		return false
	}
	return true
}

// listUnavailable answers a list that could not be read.
func (a *Lists) listUnavailable(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errListsBusy) {
		setRetryAfter(w, time.Second)
	} else if r.Context().Err() == nil {
		a.log.ErrorContext(r.Context(), "list pings", "err", err)
	}
	writeText(w, http.StatusServiceUnavailable, "the ping list is not available right now")
}

// serveList answers with the document: 304 when If-None-Match names it,
// else the body, gzip-encoded when the client takes it. A weak tag says
// that the bytes change ("updated") while the tag does not. The caller
// sets Cache-Control (and Last-Modified).
func serveList(w http.ResponseWriter, r *http.Request, d *listDoc, weak bool) {
	gz := acceptsGzip(r.Header.Get("Accept-Encoding"))
	etag := `"` + d.tag + `"`
	if gz {
		etag = `"` + d.tag + `-gzip"`
	}
	if weak {
		etag = "W/" + etag
	}
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Vary", "Accept-Encoding")
	h.Set("Content-Type", "text/xml; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	if etagMatches(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := d.body
	if gz {
		body = d.gzipped()
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// maxAge is the Cache-Control of a reading that serves until expires:
// shared caches may keep it as long as pingd does.
func maxAge(now, expires time.Time) string {
	secs := max(int64(expires.Sub(now)/time.Second), 0)
	return "public, max-age=" + strconv.FormatInt(secs, 10)
}
