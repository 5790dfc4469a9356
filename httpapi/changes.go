package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
)

// Windows of the weblogs.com change lists. Both are views of one reading:
// the pings of the last hour (lists.go).
const (
	changesWindow      = time.Hour
	shortChangesWindow = 5 * time.Minute
)

// recentKey names the reading of the last hour's pings in the list cache.
const recentKey = "recent"

// changes serves the pings received within window in the weblogs.com
// format, from the cached reading of the last hour (lists.go).
func (a *Lists) changes(view string, window time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.allowList(w, r) {
			return
		}
		now := a.hub.Now()
		l, err := a.lists.list(r.Context(), recentKey, now, func(ctx context.Context, at time.Time) ([]hub.Ping, int64, error) {
			return a.hub.Pings(ctx, at.Add(-changesWindow), listMaxEntries)
		})
		if err != nil {
			a.listUnavailable(w, r, err)
			return
		}
		d := l.doc(listView{name: view, since: l.at.Add(-window), updated: l.at, countAll: true}, r.URL.Query().Get("tag"))
		w.Header().Set("Cache-Control", maxAge(now, l.expires()))
		// The document changes with every ping and every minute ("when");
		// "updated" with every reading: the weak tag covers the former.
		serveList(w, r, d, true)
	}
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
