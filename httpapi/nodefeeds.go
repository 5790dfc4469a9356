package httpapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pingd/pingd/discovery"
	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/nodeurl"
	"github.com/pingd/pingd/internal/rsscloud"
)

// Node feed settings.
const (
	// NodeFeedTTLMinutes is the RSS <ttl> of the node feeds: how long a
	// poller may keep a copy. Push subscribers (rssCloud, WebSub, XMPP)
	// are told at once; revalidating is cheap (304, 226).
	NodeFeedTTLMinutes = 30
	// maxDeltaEvents bounds the log read for one RFC 3229 delta; a client
	// further behind gets the full feed.
	maxDeltaEvents = 1000
	// imFeed is the RFC 3229 instance manipulation for feeds.
	imFeed = "feed"
)

type feedFormat string

const (
	formatAtom feedFormat = "atom"
	formatRSS  feedFormat = "rss"
)

func (f feedFormat) contentType() string {
	if f == formatRSS {
		return "application/rss+xml; charset=utf-8"
	}
	return "application/atom+xml; charset=utf-8"
}

// feedVersion identifies one rendering of a node feed. Its entity tag is
// "<seq>.<count>.<modified>.<fingerprint>", with ".gz" appended for the
// gzip encoding: seq is the sequence number of the node's newest item and
// count the number of items served, which together name the set of items
// (items only come with higher numbers, and a retraction lowers the
// count); modified is the Last-Modified time (Unix seconds); fingerprint
// a hash of everything else the document depends on (the node's identity
// and configuration, the format, the public URL, pingd's version). What
// the log holds besides items (a subscription's last-item event, a
// revocation, a change event) is not in the document and changes none of
// it: readers do not download the feed again for a subscription. A tag
// of the same fingerprint and an older seq names a version pingd served
// before, the base of an RFC 3229 delta.
type feedVersion struct {
	seq      int64
	count    int
	modified int64
	fp       string
}

func (v feedVersion) tag(gzipped bool) string {
	t := `"` + strconv.FormatInt(v.seq, 10) + "." + strconv.Itoa(v.count) + "." + strconv.FormatInt(v.modified, 10) + "." + v.fp
	if gzipped {
		t += ".gz"
	}
	return t + `"`
}

// parseFeedTag reads a tag of ours; ok is false for anything else. The
// weak prefix and the encoding suffix are ignored: If-None-Match compares
// weakly, and both encodings carry the same entries.
func parseFeedTag(t string) (feedVersion, bool) {
	t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
	if len(t) < 2 || t[0] != '"' || t[len(t)-1] != '"' {
		return feedVersion{}, false
	}
	parts := strings.Split(t[1:len(t)-1], ".")
	if len(parts) == 5 && parts[4] == "gz" {
		parts = parts[:4]
	}
	if len(parts) != 4 || parts[3] == "" {
		return feedVersion{}, false
	}
	seq, err1 := strconv.ParseInt(parts[0], 10, 64)
	count, err2 := strconv.Atoi(parts[1])
	modified, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || seq < 0 || count < 0 {
		return feedVersion{}, false
	}
	return feedVersion{seq: seq, count: count, modified: modified, fp: parts[3]}, true
}

// splitTags splits an If-None-Match list; "*" is kept as a tag.
func splitTags(header string) []string {
	var tags []string
	for t := range strings.SplitSeq(header, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	return tags
}

// matchedBy reports whether If-None-Match names the current version.
func (v feedVersion) matchedBy(header string) bool {
	for _, t := range splitTags(header) {
		if t == "*" {
			return true
		}
		if got, ok := parseFeedTag(t); ok && got == v {
			return true
		}
	}
	return false
}

// deltaBase returns the newest version named in If-None-Match that pingd
// served before the current one, with the tag as the client wrote it.
func (v feedVersion) deltaBase(header string) (feedVersion, string, bool) {
	var best feedVersion
	var raw string
	found := false
	for _, t := range splitTags(header) {
		got, ok := parseFeedTag(t)
		if !ok || got.fp != v.fp || got.seq >= v.seq {
			continue
		}
		if !found || got.seq > best.seq {
			best, raw, found = got, t, true
		}
	}
	return best, raw, found
}

// acceptsFeedIM reports whether an A-IM header asks for the "feed"
// instance manipulation (with a non-zero quality).
func acceptsFeedIM(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		im, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(im), imFeed) {
			continue
		}
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
				if err != nil {
					f = 0
				}
				q = f
			}
		}
		if q > 0 {
			return true
		}
	}
	return false
}

// nodeFeed serves a node's own feed (Atom or RSS 2.0) from its current
// items: conditional GET (If-None-Match, then If-Modified-Since), gzip,
// and RFC 3229 "A-IM: feed" deltas. A whitelist node's feed needs its
// node's or the admin token.
func (a *Pages) nodeFeed(format feedFormat) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n, ok := loadNode(&a.site, a.hub, w, r)
		if !ok || !requireReader(a.hub, w, r, n) {
			return
		}
		ctx := r.Context()
		items, err := a.hub.Items(ctx, n, nil, n.MaxItems)
		if err != nil {
			a.feedError(w, r, n, err)
			return
		}
		modified := feedModified(n, items)
		v := feedVersion{count: len(items), modified: modified.Unix(), fp: a.feedFingerprint(n, format)}
		if len(items) > 0 {
			v.seq = items[0].Seq
		}
		gz := acceptsGzip(r.Header.Get("Accept-Encoding"))

		h := w.Header()
		h.Set("ETag", v.tag(gz))
		h.Set("Last-Modified", modified.Format(http.TimeFormat))
		h.Set("Cache-Control", "no-cache")
		if n.AccessModel == hub.AccessWhitelist {
			h.Set("Cache-Control", "private, no-cache")
		}
		h.Set("Vary", "Accept-Encoding")

		inm := r.Header.Get("If-None-Match")
		switch {
		case inm != "" && v.matchedBy(inm):
			w.WriteHeader(http.StatusNotModified)
			return
		case inm != "":
			// If-Modified-Since is ignored when If-None-Match is present
			// (RFC 9110 §13.1.3).
		case r.Header.Get("If-Modified-Since") != "":
			if since, err := http.ParseTime(r.Header.Get("If-Modified-Since")); err == nil && !modified.After(since) {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}

		status := http.StatusOK
		body := items
		if inm != "" && acceptsFeedIM(r.Header.Get("A-IM")) {
			if base, raw, found := v.deltaBase(inm); found {
				delta, ok, err := a.feedDelta(r, n, items, base.seq)
				if err != nil {
					a.feedError(w, r, n, err)
					return
				}
				if ok {
					status, body = http.StatusIMUsed, delta
					h.Set("IM", imFeed)
					h.Set("Delta-Base", raw)
					h.Set("Cache-Control", "no-store, im")
					// A delta is for this client only; the encoding's
					// Vary goes on a line of its own after RFC 3229's.
					h.Set("Vary", "A-IM, If-None-Match")
					h.Add("Vary", "Accept-Encoding")
				}
			}
		}
		doc, err := a.renderNodeFeed(n, format, modified, body)
		if err != nil {
			a.feedError(w, r, n, err)
			return
		}
		if gz {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			_, _ = zw.Write(doc)
			_ = zw.Close()
			doc = b.Bytes()
			h.Set("Content-Encoding", "gzip")
		}
		h.Set("Content-Type", format.contentType())
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Length", strconv.Itoa(len(doc)))
		w.WriteHeader(status)
		if r.Method != http.MethodHead {
			_, _ = w.Write(doc)
		}
	}
}

// feedDelta returns the items newer than the version base (Seq > base), or
// ok false when the change since base cannot be told as new entries: an
// item was retracted or the node purged (a delta only adds), the log was
// pruned past base, or the client is too far behind.
func (a *Pages) feedDelta(r *http.Request, n *hub.Node, items []hub.Event, base int64) ([]hub.Event, bool, error) {
	behind := n.LastSeq - base
	if behind <= 0 || behind > maxDeltaEvents {
		return nil, false, nil
	}
	events, err := a.hub.EventsAfter(r.Context(), n, base, int(behind))
	if err != nil {
		return nil, false, err
	}
	for i, ev := range events {
		if ev.Seq != base+int64(i)+1 {
			return nil, false, nil // pruned: the history since base is incomplete
		}
		if ev.Kind == hub.EventRetract || ev.Kind == hub.EventPurge {
			return nil, false, nil
		}
	}
	if int64(len(events)) != behind {
		return nil, false, nil
	}
	var delta []hub.Event
	for _, it := range items {
		if it.Seq > base {
			delta = append(delta, it)
		}
	}
	return delta, true, nil
}

// feedModified is the node feed's Last-Modified: the newer of the time
// its newest item was published and its last configuration change (which
// may change the document: its title, its number of items), to the
// second. Nothing else in the node's log counts: a subscription, which
// appends the last-item event of its subscriber, changes nothing readers
// fetch. A retraction changes the entity tag (its count), not this time.
func feedModified(n *hub.Node, items []hub.Event) time.Time {
	t := n.UpdatedAt
	if t.IsZero() {
		t = n.CreatedAt
	}
	if len(items) > 0 && items[0].Created.After(t) {
		t = items[0].Created
	}
	return t.UTC().Truncate(time.Second)
}

// feedFingerprint hashes what a node feed depends on besides its log.
func (a *Pages) feedFingerprint(n *hub.Node, format feedFormat) string {
	sum := sha256.New()
	fmt.Fprintf(sum, "%s\x00%s\x00%s\x00%d\x00%d\x00%d\x00%q\x00%d\x00%q\x00%s\x00%+v",
		a.cfg.Version, format, a.publicURL, n.ID, n.CreatedAt.UnixNano(), n.UpdatedAt.UnixNano(),
		n.Title, n.MaxItems, n.SourceURL, n.AccessModel, n.Polling)
	return base64.RawURLEncoding.EncodeToString(sum.Sum(nil)[:9])
}

// renderNodeFeed renders the node's feed document of items (newest first).
func (a *Pages) renderNodeFeed(n *hub.Node, format feedFormat, modified time.Time, items []hub.Event) ([]byte, error) {
	links, err := nodeurl.NodeLinks(a.publicURL, n.Name)
	if err != nil {
		return nil, err
	}
	meta := feed.NodeFeedMeta(n, links, modified)
	if format == formatAtom {
		return feed.AtomFeed(meta, items), nil
	}
	meta.SelfURL = links.RSS
	c, err := cloudOf(a.publicURL, a.cloud, links)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(c.Port)
	if err != nil {
		return nil, fmt.Errorf("rssCloud port %q: %w", c.Port, err)
	}
	cloud := &feed.Cloud{Domain: c.Domain, Port: port, Path: c.Path, RegisterProcedure: c.RegisterProcedure, Protocol: c.Protocol}
	return feed.RSSFeed(meta, cloud, NodeFeedTTLMinutes, items), nil
}

// cloudOf is the rssCloud <cloud> that node feeds and publisher snippets
// advertise: the REST endpoint, or /RPC2 when registrations are to come
// over XML-RPC or SOAP (PagesConfig.CloudProtocol).
func cloudOf(publicURL, protocol string, links nodeurl.Links) (discovery.Cloud, error) {
	c, err := discovery.CloudFor(links.PleaseNotify)
	if err != nil {
		return c, err
	}
	switch protocol {
	case rsscloud.XMLRPC:
		c.Path, c.RegisterProcedure, c.Protocol = rpcPath(publicURL), "rssCloud.pleaseNotify", rsscloud.XMLRPC
	case rsscloud.SOAP:
		c.Path, c.RegisterProcedure, c.Protocol = rpcPath(publicURL), "pleaseNotify", rsscloud.SOAP
	}
	return c, nil
}

func (a *Pages) feedError(w http.ResponseWriter, r *http.Request, n *hub.Node, err error) {
	a.log.ErrorContext(r.Context(), "serve node feed", "node", n.Name, "err", err)
	h := w.Header()
	for _, k := range []string{"ETag", "Last-Modified", "IM", "Delta-Base", "Vary"} {
		h.Del(k)
	}
	h.Set("Cache-Control", "no-store")
	writeText(w, http.StatusServiceUnavailable, "the feed is not available right now")
}

// rpcPath is the path of /RPC2 under the public URL.
func rpcPath(publicURL string) string {
	u, err := url.Parse(publicURL)
	if err != nil {
		return "/RPC2"
	}
	return strings.TrimRight(u.Path, "/") + "/RPC2"
}

// cloudProtocol checks a configured rssCloud protocol; "" is "http-post".
func cloudProtocol(p string) (string, error) {
	switch p {
	case "":
		return rsscloud.HTTPPost, nil
	case rsscloud.HTTPPost, rsscloud.XMLRPC, rsscloud.SOAP:
		return p, nil
	}
	return "", fmt.Errorf("httpapi: rssCloud protocol %q: want http-post, xml-rpc or soap", p)
}
