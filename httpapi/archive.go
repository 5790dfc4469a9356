package httpapi

import (
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
// exist answers 404; an hour without pings is an empty document. A past
// hour never changes: it carries Last-Modified and may be cached for a
// day; the current hour is served as it stands, uncached.

// maxArchiveEntries bounds one hour's document.
const maxArchiveEntries = 100000

func (a *API) archive(w http.ResponseWriter, r *http.Request) {
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
	pings, _, err := archive.PingsBetween(r.Context(), start, end, maxArchiveEntries)
	if err != nil {
		a.log.ErrorContext(r.Context(), "list archived pings", "err", err)
		writeText(w, http.StatusServiceUnavailable, "the archive is not available right now")
		return
	}
	pings = withTag(pings, r.URL.Query().Get("tag"))
	body, etag := renderChanges(pings, int64(len(pings)), end)
	h := w.Header()
	h.Set("Content-Type", "text/xml; charset=utf-8")
	h.Set("ETag", `"`+etag+`"`)
	if end.After(now) {
		h.Set("Cache-Control", "no-cache")
	} else {
		h.Set("Cache-Control", "public, max-age=86400")
		h.Set("Last-Modified", end.Format(http.TimeFormat))
	}
	if etagMatches(r.Header.Get("If-None-Match"), `"`+etag+`"`) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
