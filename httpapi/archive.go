package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/mux"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/weblogs"
)

// Hourly ping archives (seed 003: weblogs.com archived the pings of each
// hour, and "all pings received in the first hour of January 1st 2007
// would be archived in …/2007/01/01/01.xml"). The hours of a UTC day are
// numbered as the seed numbers them, 01 to 24: HH.xml holds the pings
// received from HH-1 o'clock to HH o'clock UTC, 24.xml those from 23:00 to
// midnight. The document is the changes.xml format; "updated" is the end
// of the hour, or the time of the reading while the hour runs, and "when"
// counts back from it.
//
// 00.xml, pingd's earlier name of the first hour, answers 301 to 01.xml
// of the same day. 01.xml to 23.xml are not redirected although they too
// named the hour starting at HH before: the name now means the seed's
// hour, and nothing in a request tells a reader of the old numbering from
// one of the seed's.
//
// An hour in the future, one older than the retention
// (PINGD_PING_ARCHIVE) or a date that does not exist answers 404; an hour
// without pings is an empty document. Each hour is a list of the list
// cache (lists.go): read at most once per listInterval, capped like the
// others. A past hour never changes: it carries Last-Modified and may be
// cached for a day; the current hour may be cached as long as its reading
// serves.

func (a *Lists) archivedHour(w http.ResponseWriter, r *http.Request) {
	if !a.allowList(w, r) {
		return
	}
	v := mux.Vars(r)
	num := func(k string) int { n, _ := strconv.Atoi(v[k]); return n }
	year, month, day, hour := num("year"), num("month"), num("day"), num("hour")
	if hour == 0 {
		if _, ok := weblogs.ArchiveHour(year, month, day, 1); !ok {
			writeText(w, http.StatusNotFound, "no such hour")
			return
		}
		// A relative reference: right behind a proxy that mounts pingd
		// under a path, too.
		loc := "01.xml"
		if r.URL.RawQuery != "" {
			loc += "?" + r.URL.RawQuery
		}
		w.Header().Set("Location", loc)
		writeText(w, http.StatusMovedPermanently, "the first hour of a day is 01.xml")
		return
	}
	start, ok := weblogs.ArchiveHour(year, month, day, hour)
	if !ok {
		writeText(w, http.StatusNotFound, "no such hour (a day's hours are 01.xml to 24.xml, UTC)")
		return
	}
	now := a.hub.Now().UTC()
	end := start.Add(time.Hour)
	if start.After(now) || end.Before(now.Add(-a.hub.PingRetention())) {
		writeText(w, http.StatusNotFound, "no archive for that hour (future, or older than the pings pingd keeps)")
		return
	}
	if a.archive == nil {
		writeText(w, http.StatusNotFound, "this server keeps no ping archive")
		return
	}
	l, err := a.lists.list(r.Context(), "archive "+start.Format(time.RFC3339), now,
		func(ctx context.Context, _ time.Time) ([]hub.Ping, int64, error) {
			return a.archive.PingsBetween(ctx, start, end, listMaxEntries)
		})
	if err != nil {
		a.listUnavailable(w, r, err)
		return
	}
	running := end.After(l.at)
	updated := end
	if running {
		// Read while the hour was still running: as of the reading, like
		// changes.xml, so that "when" is the minutes since each ping.
		updated = l.at
	}
	d := l.doc(listView{name: "archive", updated: updated}, r.URL.Query().Get("tag"))
	h := w.Header()
	if running {
		h.Set("Cache-Control", maxAge(now, l.expires()))
	} else {
		h.Set("Cache-Control", "public, max-age=86400")
		h.Set("Last-Modified", end.Format(http.TimeFormat))
	}
	// A running hour's "updated" changes with each reading, which its tag
	// does not cover: weak, as the lists' are.
	serveList(w, r, d, running)
}
