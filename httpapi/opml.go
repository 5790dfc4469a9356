package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/opml"
	"github.com/pingd/pingd/internal/ratelimit"
)

// OPML, the feed world's subscription list format: GET /opml lists the
// open nodes; POST /api/opml (admin) creates nodes from a list.
//
// GET /opml is public and polled like the ping lists, so it is served the
// same way: rendered at most once per opmlInterval, one rendering at a
// time, with a strong ETag, 304, gzip made once and nosniff; capped at
// opmlMaxOutlines outlines in opmlMaxBytes; readers limited per client IP
// (ListsConfig.ListRate and ListBurst, a bucket of its own).
//
// Each node is an outline of type "rss" (OPML 2.0's subscription list):
// text and title are the node's title (else its source's, else its name);
// xmlUrl is the node's own Atom feed, /atom/{node}, which a feed reader
// follows to get the node's items with pingd's WebSub hub (and nodes with
// no source have no other feed); htmlUrl is the page the feed is about,
// the source's site when a fetch found one, else the node's page
// /feeds/{node}; pingd:source (namespace opml.NS) is the source's own
// feed URL.
const (
	// opmlInterval is how long one rendering serves: nodes come and go
	// by hand or by a reader's subscription, seldom within a minute.
	opmlInterval = time.Minute
	// opmlMaxOutlines caps the list at the 5,000 oldest open nodes: a
	// document of about 1.5 MB, which feed readers still import.
	opmlMaxOutlines = 5000
	// opmlMaxBytes caps the document, whatever the names, titles and
	// URLs hold (each may be a few KB).
	opmlMaxBytes = 4 << 20
	// opmlWait bounds a request's wait for the rendering under way.
	opmlWait = 10 * time.Second
	// opmlReportText caps the names a POST /api/opml report echoes, so a
	// report stays the size of what was sent.
	opmlReportText = 200
)

// opmlList keeps the latest rendering of GET /opml.
type opmlList struct {
	limit *ratelimit.Keyed
	// slot admits one rendering at a time.
	slot chan struct{}
	// maxOutlines and maxBytes cap a rendering: opmlMaxOutlines and
	// opmlMaxBytes.
	maxOutlines, maxBytes int

	mu  sync.Mutex
	doc *opmlDoc
}

// opmlDoc is one rendering.
type opmlDoc struct {
	at   time.Time
	body []byte
	tag  string

	gzOnce sync.Once
	gz     []byte
}

func newOPMLList(rate float64, burst int) *opmlList {
	return &opmlList{limit: ratelimit.New(rate, burst), slot: make(chan struct{}, 1),
		maxOutlines: opmlMaxOutlines, maxBytes: opmlMaxBytes}
}

// fresh says whether the rendering may serve a request at now.
func (d *opmlDoc) fresh(now time.Time) bool {
	return d != nil && !now.Before(d.at) && now.Sub(d.at) < opmlInterval
}

func (d *opmlDoc) gzipped() []byte {
	d.gzOnce.Do(func() {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(d.body) // a bytes.Buffer does not fail
		_ = zw.Close()
		d.gz = b.Bytes()
	})
	return d.gz
}

// current returns the rendering that serves now, rendering it when none
// does; requests that find a rendering under way wait for it.
func (l *opmlList) current(ctx context.Context, now time.Time, render func(context.Context, time.Time) (*opmlDoc, error)) (*opmlDoc, error) {
	l.mu.Lock()
	d := l.doc
	l.mu.Unlock()
	if d.fresh(now) {
		return d, nil
	}
	wait, cancel := context.WithTimeout(ctx, opmlWait)
	defer cancel()
	select {
	case l.slot <- struct{}{}:
	case <-wait.Done():
		return nil, errListsBusy
	}
	defer func() { <-l.slot }()
	l.mu.Lock()
	d = l.doc
	l.mu.Unlock()
	if d.fresh(now) {
		return d, nil // rendered while this request waited
	}
	// The rendering serves others too: this request going away does not
	// cancel it.
	d, err := render(context.WithoutCancel(wait), now)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.doc = d
	l.mu.Unlock()
	return d, nil
}

// getOPML serves the open nodes as an OPML 2.0 subscription list.
func (a *Lists) getOPML(w http.ResponseWriter, r *http.Request) {
	key := clientKey(r)
	if ok, wait := a.opml.limit.Allow(key, time.Now()); !ok {
		setRetryAfter(w, wait)
		writeText(w, http.StatusTooManyRequests, "too many requests for the node list from "+key+"; retry later")
		return
	}
	now := a.hub.Now()
	d, err := a.opml.current(r.Context(), now, a.renderOPML)
	if err != nil {
		if errors.Is(err, errListsBusy) {
			setRetryAfter(w, time.Second)
		} else if r.Context().Err() == nil {
			a.log.ErrorContext(r.Context(), "render the node list", "err", err)
		}
		writeText(w, http.StatusServiceUnavailable, "the node list is not available right now")
		return
	}
	gz := acceptsGzip(r.Header.Get("Accept-Encoding"))
	etag := `"` + d.tag + `"`
	if gz {
		etag = `"` + d.tag + `-gzip"`
	}
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Vary", "Accept-Encoding")
	h.Set("Content-Type", "text/x-opml; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	secs := max(int64(d.at.Add(opmlInterval).Sub(now)/time.Second), 0)
	h.Set("Cache-Control", "public, max-age="+strconv.FormatInt(secs, 10))
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

// renderOPML reads the open nodes and renders the list.
func (a *Lists) renderOPML(ctx context.Context, now time.Time) (*opmlDoc, error) {
	nodes, total, err := a.hub.OpenNodes(ctx, a.opml.maxOutlines)
	if err != nil {
		return nil, err
	}
	feeds := make([]opml.Feed, 0, len(nodes))
	size := 0
	for _, n := range nodes {
		f := opml.Feed{Text: n.Title, XMLURL: a.nodeURL("atom", n.Name), HTMLURL: n.SiteURL}
		if f.Text == "" {
			f.Text = n.SourceTitle
		}
		if f.Text == "" {
			f.Text = n.Name
		}
		if f.HTMLURL == "" {
			f.HTMLURL = a.nodeURL("feeds", n.Name)
		}
		if n.SourceURL != "" {
			f.Extra = map[string]string{"source": n.SourceURL}
		}
		// Escaping at most doubles a value six times over (&quot;);
		// counted that way, the cap holds whatever the values are.
		size += 200 + 6*(2*len(f.Text)+len(f.XMLURL)+len(f.HTMLURL)+len(n.SourceURL))
		if size > a.opml.maxBytes {
			break
		}
		feeds = append(feeds, f)
	}
	title := "Open nodes of pingd at " + a.publicURL
	if len(feeds) < total {
		title += fmt.Sprintf(" (the first %d of %d)", len(feeds), total)
	}
	var b bytes.Buffer
	if err := opml.Write(&b, opml.Head{Title: title, Docs: opml.SpecURL}, feeds); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b.Bytes())
	return &opmlDoc{at: now, body: b.Bytes(), tag: base64.RawURLEncoding.EncodeToString(sum[:18])}, nil
}

// opmlImportJSON is the answer of POST /api/opml.
type opmlImportJSON struct {
	Created  int               `json:"created"`
	Existed  int               `json:"existed"`
	Refused  int               `json:"refused"`
	Outlines []opmlOutcomeJSON `json:"outlines"`
}

// opmlOutcomeJSON is what became of one outline.
type opmlOutcomeJSON struct {
	// Index numbers the document's outlines from 1, folders included.
	Index   int      `json:"index"`
	Folders []string `json:"folders,omitempty"`
	Text    string   `json:"text"`
	XMLURL  string   `json:"xml_url,omitempty"`
	// Result is "created", "existed" or "refused".
	Result string `json:"result"`
	Node   string `json:"node,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// importOPML creates an open node for each feed of an OPML subscription
// list that no node follows yet, and reports outline by outline.
func (a *Lists) importOPML(w http.ResponseWriter, r *http.Request) {
	if !a.limitBody(w, r, func(msg string) { writeJSONError(w, http.StatusRequestEntityTooLarge, msg) }) {
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if isTooLarge(err) {
			writeJSONError(w, http.StatusRequestEntityTooLarge, a.tooLargeMessage()+"; split the list")
		} else {
			writeJSONError(w, http.StatusBadRequest, "could not read the request body")
		}
		return
	}
	outlines, err := opml.Parse(body, opml.DefaultLimits)
	switch {
	case errors.Is(err, opml.ErrTooLarge):
		writeJSONError(w, http.StatusRequestEntityTooLarge, err.Error()+"; split the list")
		return
	case err != nil:
		writeJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	out := opmlImportJSON{Outlines: make([]opmlOutcomeJSON, 0, len(outlines))}
	for _, o := range outlines {
		res := a.importOutline(r.Context(), o)
		switch res.Result {
		case "created":
			out.Created++
		case "existed":
			out.Existed++
		default:
			out.Refused++
		}
		out.Outlines = append(out.Outlines, res)
	}
	a.log.InfoContext(r.Context(), "OPML imported", "outlines", len(outlines), "created", out.Created, "existed", out.Existed, "refused", out.Refused)
	writeJSON(w, http.StatusOK, out)
}

// importOutline finds or creates the node of one outline's feed.
func (a *Lists) importOutline(ctx context.Context, o opml.Outline) opmlOutcomeJSON {
	res := opmlOutcomeJSON{Index: o.Index, Text: clipBytes(o.Name(), opmlReportText), XMLURL: clipBytes(o.XMLURL, opmlReportText)}
	for _, f := range o.Folders {
		res.Folders = append(res.Folders, clipBytes(f, opmlReportText))
	}
	refuse := func(reason string) opmlOutcomeJSON {
		res.Result, res.Reason = "refused", reason
		return res
	}
	found := func(n string) opmlOutcomeJSON {
		res.Result, res.Node = "existed", n
		return res
	}
	if o.XMLURL == "" {
		return refuse("no xmlUrl: not a feed subscription")
	}
	if name, own := a.ownNodeName(o.XMLURL); own {
		if n, err := a.hub.Node(ctx, name); err == nil {
			return found(n.Name)
		}
		return refuse("it names a node of this pingd that does not exist")
	}
	source, err := hub.CanonicalURL(o.XMLURL)
	if err != nil {
		return refuse(err.Error())
	}
	// Any node following the feed, however its URL is spelled, whitelist
	// nodes included: a whitelist node's source never gets an open node.
	n, err := a.hub.NodeForURL(ctx, source, false)
	switch {
	case err == nil:
		return found(n.Name)
	case !errors.Is(err, hub.ErrNotFound):
		a.log.ErrorContext(ctx, "OPML import: look up a feed", "url", source, "err", err)
		return refuse("pingd could not look it up (internal error); import the list again")
	}
	if err := a.checkOutbound(ctx, "the feed", source); err != nil {
		return refuse(err.Error())
	}
	cfg := hub.DefaultNodeConfig()
	cfg.Title = clipBytes(o.Name(), 1024)
	if o.Name() == o.XMLURL {
		cfg.Title = ""
	}
	created, _, err := a.hub.CreateNode(ctx, hub.NodeSpec{Name: hub.ImplicitNodeName(source), Source: source, Config: cfg})
	switch {
	case err == nil:
		res.Result, res.Node = "created", created.Name
		return res
	case errors.Is(err, hub.ErrExists):
		return refuse(fmt.Sprintf("the node name %q is taken by a node that follows another source", hub.ImplicitNodeName(source)))
	case errors.Is(err, hub.ErrInvalid):
		return refuse(err.Error())
	}
	a.log.ErrorContext(ctx, "OPML import: create a node", "url", source, "err", err)
	return refuse("pingd could not store it (internal error); import the list again")
}

// clipBytes shortens s to at most n bytes, on a character boundary, marking
// the cut with "…".
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
