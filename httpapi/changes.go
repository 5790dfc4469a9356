package httpapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/pingd/pingd/hub"
)

// Windows of the weblogs.com change lists.
const (
	changesWindow      = time.Hour
	shortChangesWindow = 5 * time.Minute
	// maxChangesEntries bounds one document; the newest pings are kept.
	maxChangesEntries = 10000
)

func (a *API) changesRoutes(r *mux.Router) {
	r.HandleFunc("/changes.xml", a.changes(changesWindow)).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/shortChanges.xml", a.changes(shortChangesWindow)).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/{year:[0-9]{4}}/{month:[0-9]{2}}/{day:[0-9]{2}}/{hour:[0-9]{2}}.xml", a.archive).Methods(http.MethodGet, http.MethodHead)
}

// withTag keeps the pings carrying tag (case-insensitive); all when tag
// is empty.
func withTag(pings []hub.Ping, tag string) []hub.Ping {
	if tag == "" {
		return pings
	}
	out := pings[:0:0]
	for _, p := range pings {
		for _, t := range p.Tags {
			if strings.EqualFold(t, tag) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// changes serves the pings received within window in the weblogs.com
// format: <weblogUpdates version="2" updated count> with one
// <weblog name url when> per ping, when in minutes ago, newest first.
func (a *API) changes(window time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		now := a.hub.Now()
		pings, total, err := a.hub.Pings(r.Context(), now.Add(-window), maxChangesEntries)
		if err != nil {
			a.log.ErrorContext(r.Context(), "list pings", "err", err)
			writeText(w, http.StatusServiceUnavailable, "the change list is not available right now")
			return
		}
		if tag := r.URL.Query().Get("tag"); tag != "" {
			pings = withTag(pings, tag)
			total = int64(len(pings))
		}
		body, etag := renderChanges(pings, total, now)
		gz := acceptsGzip(r.Header.Get("Accept-Encoding"))
		if gz {
			etag += "-gzip"
		}
		// The document changes with every ping and every minute ("when"),
		// and "updated" with every request; the weak tag covers the former.
		tag := `W/"` + etag + `"`
		h := w.Header()
		h.Set("ETag", tag)
		h.Set("Vary", "Accept-Encoding")
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Type", "text/xml; charset=utf-8")
		if etagMatches(r.Header.Get("If-None-Match"), tag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if gz {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			_, _ = zw.Write(body)
			_ = zw.Close()
			body = b.Bytes()
			h.Set("Content-Encoding", "gzip")
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write(body)
		}
	}
}

// renderChanges writes the document and an entity tag of everything in it
// but the "updated" time.
func renderChanges(pings []hub.Ping, total int64, now time.Time) ([]byte, string) {
	var b bytes.Buffer
	sum := sha256.New()
	fmt.Fprintf(sum, "%d\n", total)
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	fmt.Fprintf(&b, `<weblogUpdates version="2" updated="%s" count="%d">`+"\n",
		now.UTC().Format(http.TimeFormat), total)
	for _, p := range pings {
		when := int64(now.Sub(p.ReceivedAt) / time.Minute)
		if when < 0 {
			when = 0
		}
		b.WriteString(` <weblog name="`)
		escapeAttr(&b, p.Name)
		b.WriteString(`" url="`)
		escapeAttr(&b, p.URL)
		fmt.Fprintf(&b, `" when="%d"/>`+"\n", when)
		fmt.Fprintf(sum, "%d %d %q %q\n", p.ID, when, p.Name, p.URL)
	}
	b.WriteString("</weblogUpdates>\n")
	return b.Bytes(), base64.RawURLEncoding.EncodeToString(sum.Sum(nil)[:18])
}

// escapeAttr writes s for a double-quoted attribute value; characters XML
// cannot carry become U+FFFD.
func escapeAttr(b *bytes.Buffer, s string) {
	_ = xml.EscapeText(b, []byte(s))
}

// acceptsGzip reports whether an Accept-Encoding header accepts gzip with a
// non-zero quality (explicitly or through "*").
func acceptsGzip(header string) bool {
	gzipQ, starQ := -1.0, -1.0
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					f = 0
				}
				q = f
			}
		}
		switch strings.ToLower(strings.TrimSpace(coding)) {
		case "gzip", "x-gzip":
			gzipQ = max(gzipQ, q)
		case "*":
			starQ = max(starQ, q)
		}
	}
	if gzipQ >= 0 {
		return gzipQ > 0
	}
	return starQ > 0
}

// etagMatches applies If-None-Match's weak comparison: "*" or any listed
// tag equal to tag, ignoring W/ prefixes.
func etagMatches(header, tag string) bool {
	if header == "" {
		return false
	}
	opaque := strings.TrimPrefix(tag, "W/")
	for t := range strings.SplitSeq(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == opaque {
			return true
		}
	}
	return false
}
