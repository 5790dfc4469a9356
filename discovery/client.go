package discovery

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/ratelimit"
)

// Client discovers what a URL offers. Its HTTP client must be the
// SSRF-guarded one (internal/netguard), which follows at most 5 redirects.
type Client struct {
	HTTP      *http.Client
	UserAgent string
	// MaxBodyBytes caps each body read; default 2 MiB (a page's head or a
	// feed's channel comes early; the rest is not needed).
	MaxBodyBytes int64
}

// DefaultMaxBodyBytes caps a discovery read.
const DefaultMaxBodyBytes = 2 << 20

// maxDescriptors bounds the XRDS documents fetched for one URL.
const maxDescriptors = 3

// ErrNoFeed says an HTML page links to no feed. It has a NoFeed method
// so that callers that may not import this package (the component) can
// tell it from other failures and answer people in their own words.
var ErrNoFeed error = noFeed{}

type noFeed struct{}

func (noFeed) Error() string { return "the page links to no RSS or Atom feed" }
func (noFeed) NoFeed() bool  { return true }

// StatusError is a look-up's answer other than 2xx. HTTPStatus lets
// callers that may not import this package read the code.
type StatusError struct {
	URL  string
	Code int
}

func (e *StatusError) Error() string   { return fmt.Sprintf("discover %s: HTTP %d", e.URL, e.Code) }
func (e *StatusError) HTTPStatus() int { return e.Code }

// Discover fetches rawURL and reports the feeds, hubs, clouds and GetPingd
// services it names, reading the XRDS documents of its descriptors.
func (c *Client) Discover(ctx context.Context, rawURL string) (*Found, error) {
	if err := hub.ValidURL(rawURL); err != nil {
		return nil, err
	}
	resp, body, err := c.get(ctx, rawURL, "text/html, application/atom+xml, application/rss+xml;q=0.9, application/xml;q=0.8, */*;q=0.5")
	if err != nil {
		return nil, err
	}
	final := resp.Request.URL
	f := &Found{URL: rawURL, FinalURL: final.String(), ContentType: mediaType(resp.Header.Get("Content-Type")), Kind: "other"}
	f.parseHeaders(final, resp.Header)
	switch {
	case f.parseFeed(final, body):
		f.Kind = "feed"
	case looksLikeHTML(f.ContentType, body):
		f.Kind = "html"
		f.parseHTML(final, body)
		rankFeeds(f.Feeds)
	}
	for i, d := range f.Descriptors {
		if i == maxDescriptors {
			break
		}
		svcs, err := c.xrds(ctx, d)
		if err != nil {
			continue // a broken descriptor does not spoil the rest
		}
		f.Services = append(f.Services, svcs...)
	}
	f.choose()
	return f, nil
}

// looksLikeHTML reports whether an answer is an HTML page.
func looksLikeHTML(contentType string, body []byte) bool {
	if contentType == "text/html" || contentType == "application/xhtml+xml" {
		return true
	}
	return strings.HasPrefix(http.DetectContentType(body), "text/html")
}

// xrds fetches and reads one XRDS document.
func (c *Client) xrds(ctx context.Context, descriptor string) ([]Service, error) {
	_, body, err := c.get(ctx, descriptor, ContentTypeXRDS+", application/xml;q=0.5")
	if err != nil {
		return nil, err
	}
	return parseXRDS(descriptor, body)
}

// get fetches a URL and reads its body up to the cap; only 2xx answers.
func (c *Client) get(ctx context.Context, rawURL, accept string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("discover %s: %w", rawURL, err)
	}
	req.Header.Set("Accept", accept)
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	resp, err := c.metered().Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("discover %s: %w", rawURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, nil, &StatusError{URL: rawURL, Code: resp.StatusCode}
	}
	limit := c.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	// A body over the cap is read up to it: the links are near the top.
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, nil, fmt.Errorf("discover %s: read: %w", rawURL, err)
	}
	return resp, bytes.Clone(body), nil
}

// metered is the client with every request it makes, each hop of a
// redirect chain included, counted against the budget of the look-up
// its context belongs to (ratelimit.Spend): a page that redirects five
// times costs six requests, not one.
func (c *Client) metered() *http.Client {
	hc := *c.HTTP
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = meteredTransport{base: base}
	return &hc
}

// meteredTransport spends a request of the look-up's budget before each
// round trip.
type meteredTransport struct{ base http.RoundTripper }

func (t meteredTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := ratelimit.Spend(req.Context()); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return t.base.RoundTrip(req)
}

// ResolveSource implements hub.SourceResolver: a feed (or anything that is
// not an HTML page) is its own source; a page's source is the best feed it
// links to.
func (c *Client) ResolveSource(ctx context.Context, rawURL string) (*hub.ResolvedSource, error) {
	f, err := c.Discover(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	return resolved(f)
}

// resolved is the source Found stands for: the choice node creation
// makes from a page and Follow follows.
func resolved(f *Found) (*hub.ResolvedSource, error) {
	if f.Kind != "html" {
		return &hub.ResolvedSource{FeedURL: f.URL}, nil
	}
	if len(f.Feeds) == 0 {
		return nil, fmt.Errorf("%s: %w", f.URL, ErrNoFeed)
	}
	res := &hub.ResolvedSource{FeedURL: f.Feeds[0].URL, FromPage: true}
	for _, l := range f.Feeds[1:] {
		res.Alternatives = append(res.Alternatives, l.URL)
	}
	return res, nil
}

// Follow discovers rawURL and, when it is a page, the feed it stands for
// (the one ResolveSource, and so node creation, chooses): everything a
// publisher's page leads to, the page's own hubs and descriptors and
// those of its feed (the feed's Link headers and body, its rssCloud
// clouds, its descriptors' services), in Found.Followed. A feed that
// cannot be read is reported in Found.FollowError; only a page that
// cannot be read is an error.
func (c *Client) Follow(ctx context.Context, rawURL string) (*Found, error) {
	f, err := c.Discover(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	res, err := resolved(f)
	if err != nil || !res.FromPage {
		return f, nil
	}
	feed, err := c.Discover(ctx, res.FeedURL)
	if err != nil {
		f.FollowError = err.Error()
		return f, nil
	}
	f.Followed = feed
	return f, nil
}

var _ hub.SourceResolver = (*Client)(nil)
