package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/mux"

	"github.com/pingd/pingd/hub"
)

// Hourly ping archives (seed 003: weblogs.com archived the pings of each
// hour at /YYYY/MM/DD/HH.xml). HH.xml holds the pings received from HH:00
// to HH:59 UTC (00–23), in the changes.xml format with "updated" the end
// of the hour and "when" the minutes before it. An hour in the future, one
// older than the retention (PINGD_PING_ARCHIVE) or a date that does not
// exist answers 404; an hour without pings is an empty document. Each hour
// is a list of the list cache (lists.go): read at most once per
// listInterval, capped like the others. A past hour never changes: it
// carries Last-Modified and may be cached for a day; the current hour may
// be cached as long as its reading serves.

func (a *API) archive(w http.ResponseWriter, r *http.Request) {
	if !a.allowList(w, r) {
		return
	}
	v := mux.Vars(r)
	num := func(k string) int { n, _ := strconv.Atoi(v[k]); return n }
	year, month, day, hour := num("year"), num("month"), num("day"), num("hour")
	start := time.Date(year, time.Month(month), day, hour, 0, 0, 0, time.UTC)
	if start.Year() != year || int(start.Month()) != month || start.Day() != day || start.Hour() != hour {
		writeText(w, http.StatusNotFound, "no such hour")
		return
	}
	now := a.hub.Now().UTC()
	end := start.Add(time.Hour)
	if start.After(now) || end.Before(now.Add(-a.hub.PingRetention())) {
		writeText(w, http.StatusNotFound, "no archive for that hour (future, or older than the pings pingd keeps)")
		return
	}
	archive, ok := a.hub.Store().(hub.PingArchive)
	if !ok {
		writeText(w, http.StatusNotFound, "this store keeps no archive")
		return
	}
	l, err := a.lists.list(r.Context(), "archive "+start.Format(time.RFC3339), now,
		func(ctx context.Context, _ time.Time) ([]hub.Ping, int64, error) {
			return archive.PingsBetween(ctx, start, end, listMaxEntries)
		})
	if err != nil {
		a.listUnavailable(w, r, err)
		return
	}
	d := l.doc(listView{name: "archive", updated: end}, r.URL.Query().Get("tag"))
	h := w.Header()
	if end.After(l.at) {
		// Read while the hour was still running.
		h.Set("Cache-Control", maxAge(now, l.expires()))
	} else {
		h.Set("Cache-Control", "public, max-age=86400")
		h.Set("Last-Modified", end.Format(http.TimeFormat))
	}
	serveList(w, r, d, false)
}
