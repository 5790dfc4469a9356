package feed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/linkheader"
	"github.com/pingd/pingd/internal/netguard"
)

// Errors a fetch can end with, inside a *hub.FetchError.
var (
	ErrTooManyRedirects = errors.New("too many redirects")
	ErrRedirectLoop     = errors.New("redirect loop")
	ErrBadRedirect      = errors.New("redirect without a usable location")
	ErrHTTPStatus       = errors.New("unexpected HTTP status")
)

// MaxRedirects is the longest redirect chain a fetch follows.
const MaxRedirects = 5

// Defaults of FetcherConfig.
const (
	DefaultMaxBodyBytes = 10 << 20
	DefaultFetchTimeout = 30 * time.Second
)

// acceptFeeds prefers feed types but takes anything: non-feed resources are
// watched too.
const acceptFeeds = "application/atom+xml, application/rss+xml, application/rdf+xml;q=0.9, application/xml;q=0.8, text/xml;q=0.8, */*;q=0.5"

// FetcherConfig configures NewFetcher. Zero values take the defaults.
type FetcherConfig struct {
	// Version and PublicURL go into the User-Agent.
	Version   string
	PublicURL string
	// AllowPrivate lets fetches reach loopback and private addresses.
	AllowPrivate bool
	// MaxBodyBytes caps a body, before and after decompression; default 10 MiB.
	MaxBodyBytes int64
	// Timeout bounds one whole fetch, every redirect included; default 30s.
	Timeout time.Duration
	// Client, when set, is used instead of a netguard client; its redirect
	// policy is replaced (the fetcher follows redirects itself).
	Client *http.Client
	// Now is the clock (default time.Now): fetch times and Retry-After.
	Now func() time.Time
}

// Fetcher fetches sources politely; it implements hub.Fetcher and is safe
// for concurrent use.
type Fetcher struct {
	cfg    FetcherConfig
	client *http.Client
}

var _ hub.Fetcher = (*Fetcher)(nil)

// NewFetcher returns a Fetcher.
func NewFetcher(cfg FetcherConfig) *Fetcher {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultFetchTimeout
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	var c http.Client
	if cfg.Client != nil {
		c = *cfg.Client
	} else {
		c = *netguard.NewClient(netguard.Options{AllowPrivate: cfg.AllowPrivate, Timeout: cfg.Timeout})
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Fetcher{cfg: cfg, client: &c}
}

// UserAgent is the User-Agent of a fetch on behalf of n subscribers.
func (f *Fetcher) UserAgent(n int) string {
	ua := "pingd/" + f.cfg.Version + " ("
	if f.cfg.PublicURL != "" {
		ua += "+" + f.cfg.PublicURL + "; "
	}
	return ua + strconv.Itoa(max(n, 0)) + " subscribers)"
}

// fetchState accumulates what the hops of one fetch learnt.
type fetchState struct {
	req      hub.FetchRequest
	useDelta bool
	// deltas: the origin answered 226 IM Used with a feed delta, merged
	// or not (then the full document was asked for again).
	deltas       bool
	visited      map[string]bool
	hops         int
	allPermanent bool
	permanentURL string
	bytes        int64
}

// previous is the representation a delta is merged into: the request's
// Previous, or what LoadPrevious reads (only when a delta came).
func (st *fetchState) previous(ctx context.Context) ([]byte, error) {
	if len(st.req.Previous) > 0 || st.req.LoadPrevious == nil {
		return st.req.Previous, nil
	}
	body, err := st.req.LoadPrevious(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the last representation: %w", err)
	}
	if len(body) == 0 {
		return nil, errors.New("no last representation is stored")
	}
	return body, nil
}

// Fetch performs one conditional fetch of req.URL, following up to
// MaxRedirects redirects, and parses what it got.
func (f *Fetcher) Fetch(ctx context.Context, req hub.FetchRequest) (*hub.FetchResult, error) {
	if err := hub.ValidURL(req.URL); err != nil {
		return nil, &hub.FetchError{URL: req.URL, Err: err}
	}
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > f.cfg.Timeout {
		// (The fetch loop's context has its own, usually the same: a
		// second timer a fetch would be for nothing.)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.cfg.Timeout)
		defer cancel()
	}
	// A-IM: feed needs a base the origin can name: the ETag of Previous.
	useDelta := (len(req.Previous) > 0 || req.LoadPrevious != nil) && req.ETag != ""
	st := newFetchState(req, useDelta)
	res, err := f.follow(ctx, st, req.URL)
	if err != nil && useDelta && errors.Is(err, ErrBadDelta) {
		// A delta we cannot merge: ask once more for the full document.
		spent, deltas := st.bytes, st.deltas
		st = newFetchState(req, false)
		st.bytes, st.deltas = spent, deltas
		res, err = f.follow(ctx, st, req.URL)
	}
	if res != nil {
		res.Bytes = st.bytes
	}
	return res, err
}

func newFetchState(req hub.FetchRequest, useDelta bool) *fetchState {
	// visited is filled by the first redirect: most fetches have none.
	return &fetchState{req: req, useDelta: useDelta, allPermanent: true}
}

// canonicalOr is the canonical form of u, or u when it has none.
func canonicalOr(u string) string {
	if c, err := hub.CanonicalURL(u); err == nil {
		return c
	}
	return u
}

// follow fetches u and the redirects it leads to.
func (f *Fetcher) follow(ctx context.Context, st *fetchState, u string) (*hub.FetchResult, error) {
	for {
		resp, raw, err := f.get(ctx, st, u)
		if err != nil {
			return nil, err
		}
		now := f.cfg.Now()
		switch code := resp.StatusCode; {
		case code == http.StatusMovedPermanently || code == http.StatusPermanentRedirect ||
			code == http.StatusFound || code == http.StatusSeeOther || code == http.StatusTemporaryRedirect:
			loc := resp.Header.Get("Location")
			next, err := f.redirect(st, u, loc, code == http.StatusMovedPermanently || code == http.StatusPermanentRedirect)
			if err != nil {
				return nil, &hub.FetchError{URL: u, Status: code, Err: err}
			}
			u = next
			continue

		case code == http.StatusNotModified:
			res := f.baseResult(st, resp, u, now)
			res.NotModified = true
			return res, nil

		case code == http.StatusGone:
			res := f.baseResult(st, resp, u, now)
			res.Gone = true
			return res, nil

		case code == http.StatusIMUsed:
			if !st.useDelta || !hasToken(resp.Header.Values("IM"), "feed") {
				return nil, &hub.FetchError{URL: u, Status: code, Err: fmt.Errorf("%w: 226 without IM: feed to a request that did not ask for it", ErrBadDelta)}
			}
			st.deltas = true
			body, ctype, err := f.decodeBody(resp, raw)
			if err != nil {
				return nil, &hub.FetchError{URL: u, Status: code, Err: err}
			}
			previous, err := st.previous(ctx)
			if err != nil {
				return nil, &hub.FetchError{URL: u, Status: code, Err: fmt.Errorf("%w: %w", ErrBadDelta, err)}
			}
			merged, err := mergeDelta(previous, body)
			if err == nil && int64(len(merged)) > f.cfg.MaxBodyBytes {
				// The full document is smaller than what we accumulated.
				err = fmt.Errorf("%w: merged document of %d bytes is %w", ErrBadDelta, len(merged), ErrBodyTooLarge)
			}
			if err != nil {
				return nil, &hub.FetchError{URL: u, Status: code, Err: err}
			}
			return f.fullResult(st, resp, u, merged, ctype, now)

		case code >= 200 && code < 300:
			body, ctype, err := f.decodeBody(resp, raw)
			if err != nil {
				return nil, &hub.FetchError{URL: u, Status: code, Err: err}
			}
			if loc, ok := XMLRedirect(body); ok {
				if loc == "" {
					res := f.baseResult(st, resp, u, now)
					res.Gone = true
					return res, nil
				}
				next, err := f.redirect(st, u, loc, true)
				if err != nil {
					return nil, &hub.FetchError{URL: u, Status: code, Err: fmt.Errorf("XML redirect: %w", err)}
				}
				u = next
				continue
			}
			return f.fullResult(st, resp, u, body, ctype, now)

		default:
			fe := &hub.FetchError{URL: u, Status: code, Err: fmt.Errorf("%w: %s", ErrHTTPStatus, resp.Status)}
			if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
				fe.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), now)
			}
			return nil, fe
		}
	}
}

// redirect checks one hop from cur to loc and returns the absolute target.
func (f *Fetcher) redirect(st *fetchState, cur, loc string, permanent bool) (string, error) {
	if strings.TrimSpace(loc) == "" {
		return "", ErrBadRedirect
	}
	base, err := url.Parse(cur)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadRedirect, err)
	}
	ref, err := url.Parse(strings.TrimSpace(loc))
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrBadRedirect, loc, err)
	}
	next := base.ResolveReference(ref)
	// In canonical form: a loop through spellings of one URL is a loop,
	// and a permanent target is stored (the source's URL) as it is looked
	// up.
	target, err := hub.CanonicalURL(next.String())
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadRedirect, err)
	}
	if st.visited == nil {
		st.visited = map[string]bool{canonicalOr(st.req.URL): true}
	}
	if st.visited[target] {
		return "", fmt.Errorf("%w: %s leads back to %s", ErrRedirectLoop, cur, target)
	}
	st.hops++
	if st.hops > MaxRedirects {
		return "", fmt.Errorf("%w: more than %d", ErrTooManyRedirects, MaxRedirects)
	}
	st.visited[target] = true
	if !permanent {
		st.allPermanent = false
	}
	if permanent && st.allPermanent {
		st.permanentURL = target
	}
	return target, nil
}

// get sends one request and reads the raw (still encoded) body, capped.
func (f *Fetcher) get(ctx context.Context, st *fetchState, u string) (*http.Response, []byte, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, &hub.FetchError{URL: u, Err: err}
	}
	h := hreq.Header
	h.Set("User-Agent", f.UserAgent(st.req.Subscribers))
	h.Set("Accept", acceptFeeds)
	// Set explicitly, so the transport does not decode gzip behind our back
	// (it would hide the bytes on the wire) and deflate is offered too.
	h.Set("Accept-Encoding", "gzip, deflate")
	if st.req.ETag != "" {
		h.Set("If-None-Match", st.req.ETag)
	}
	if st.req.LastModified != "" {
		h.Set("If-Modified-Since", st.req.LastModified)
	}
	if st.useDelta {
		h.Set("A-IM", "feed")
	}
	resp, err := f.client.Do(hreq)
	if err != nil {
		return nil, nil, &hub.FetchError{URL: u, Err: unwrapURLError(err)}
	}
	defer resp.Body.Close()
	st.bytes += headerBytes(resp)
	raw, err := readCapped(resp.Body, f.cfg.MaxBodyBytes)
	st.bytes += int64(len(raw))
	if err != nil {
		return nil, nil, &hub.FetchError{URL: u, Status: resp.StatusCode, Err: err}
	}
	return resp, raw, nil
}

// unwrapURLError drops *url.Error's "Get \"…\":" prefix; FetchError
// already names the URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// headerBytes estimates the size of the status line and headers as they
// crossed the network (HTTP/1.1 framing).
func headerBytes(resp *http.Response) int64 {
	n := int64(len(resp.Proto) + len(resp.Status) + 3)
	for k, vs := range resp.Header {
		for _, v := range vs {
			n += int64(len(k) + len(v) + 4)
		}
	}
	return n + 2
}

func (f *Fetcher) decodeBody(resp *http.Response, raw []byte) ([]byte, string, error) {
	body, err := decodeContent(raw, resp.Header.Get("Content-Encoding"), f.cfg.MaxBodyBytes)
	if err != nil {
		return nil, "", err
	}
	body, ctype := toUTF8(body, resp.Header.Get("Content-Type"))
	return body, ctype, nil
}

// baseResult fills what every answer carries: status, URLs, validators and
// header hints.
func (f *Fetcher) baseResult(st *fetchState, resp *http.Response, u string, now time.Time) *hub.FetchResult {
	return &hub.FetchResult{
		Status:       resp.StatusCode,
		FinalURL:     u,
		PermanentURL: st.permanentURL,
		ETag:         resp.Header.Get("ETag"),
		LastModified: resp.Header.Get("Last-Modified"),
		ContentType:  resp.Header.Get("Content-Type"),
		Hints:        headerHints(resp.Header, now),
		Deltas:       st.deltas,
	}
}

// fullResult parses a full representation; a document past the parse
// limits fails the fetch, so the source shows why and backs off.
func (f *Fetcher) fullResult(st *fetchState, resp *http.Response, u string, body []byte, ctype string, now time.Time) (*hub.FetchResult, error) {
	doc, err := Parse(body, u, now)
	if err != nil {
		return nil, &hub.FetchError{URL: u, Status: resp.StatusCode, Err: err}
	}
	res := f.baseResult(st, resp, u, now)
	res.Links = headerLinks(resp.Header, u)
	res.ContentType = ctype
	res.Body = body
	sum := sha256.Sum256(body)
	res.BodyHash = hex.EncodeToString(sum[:])
	res.IsFeed = doc.IsFeed
	res.Title, res.Description, res.SiteURL = doc.Title, doc.Description, doc.SiteURL
	res.Entries = doc.Entries
	hdr := res.Hints
	res.Hints = doc.Hints
	res.Hints.MaxAge, res.Hints.Expires, res.Hints.RetryAfter = hdr.MaxAge, hdr.Expires, hdr.RetryAfter
	return res, nil
}

// headerLinks reads the answer's Link header fields: the links about the
// resource at u (no anchor naming another one) with http(s) targets.
func headerLinks(h http.Header, u string) []hub.HeaderLink {
	values := h.Values("Link")
	if len(values) == 0 {
		return nil
	}
	base, err := url.Parse(u)
	if err != nil {
		return nil
	}
	var out []hub.HeaderLink
	for _, l := range linkheader.Parse(values, base) {
		if !l.AboutBase(base) || len(l.Rels) == 0 || hub.ValidURL(l.Target) != nil {
			continue
		}
		out = append(out, hub.HeaderLink{URL: l.Target, Rels: l.Rels})
	}
	return out
}

// headerHints reads Cache-Control max-age, Expires and Retry-After.
func headerHints(h http.Header, now time.Time) hub.PollHints {
	var hints hub.PollHints
	for _, cc := range h.Values("Cache-Control") {
		for d := range strings.SplitSeq(cc, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(d), "=")
			if strings.EqualFold(k, "max-age") {
				if n, err := strconv.ParseInt(strings.Trim(v, `"`), 10, 64); err == nil && n > 0 {
					hints.MaxAge = time.Duration(min(n, 365*24*3600)) * time.Second
				}
			}
		}
	}
	if e := h.Get("Expires"); e != "" {
		if t, err := http.ParseTime(e); err == nil && t.After(now) {
			hints.Expires = t.UTC()
		}
	}
	hints.RetryAfter = parseRetryAfter(h.Get("Retry-After"), now)
	return hints
}

// parseRetryAfter reads delay-seconds or an HTTP date; zero when absent,
// invalid or past.
func parseRetryAfter(v string, now time.Time) time.Time {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return time.Time{}
		}
		return now.Add(time.Duration(min(n, 365*24*3600)) * time.Second).UTC()
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.UTC()
	}
	return time.Time{}
}

// hasToken reports whether a comma-separated header holds token.
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			t, _, _ = strings.Cut(t, ";")
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// ReadEntries reads the entries of a stored representation of sourceURL,
// fetched at fetchedAt, as Fetch gave them (hub.EntryReader).
func (f *Fetcher) ReadEntries(body []byte, sourceURL string, fetchedAt time.Time) ([]hub.Entry, bool, error) {
	doc, err := Parse(body, sourceURL, fetchedAt)
	if err != nil {
		return nil, false, err
	}
	return doc.Entries, doc.IsFeed, nil
}
