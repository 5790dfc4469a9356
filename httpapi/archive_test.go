package httpapi

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// archivePath is the path of the archive of the hour starting at start (a
// whole UTC hour): the seed numbers a day's hours 01 to 24.
func archivePath(start time.Time) string {
	start = start.UTC()
	return fmt.Sprintf("/%s/%02d.xml", start.Format("2006/01/02"), start.Hour()+1)
}

func TestArchivesAndTags(t *testing.T) {
	e := newEnv(t)
	extended := func(name, u, tags string) {
		t.Helper()
		_, v, err := e.rpc("weblogUpdates.extendedPing", name, u, u+"changed", u+"feed.xml", tags)
		if err != nil {
			t.Fatal(err)
		}
		wantFlerror(t, v, false)
	}
	// Pings in an hour that then lies in the past.
	start := e.clock.Now().Truncate(time.Hour).Add(-3 * time.Hour)
	e.clock.Set(start.Add(10 * time.Minute))
	extended("Go blog", "http://go.example/", "Go | xmpp|go")
	e.clock.Advance(20 * time.Minute)
	extended("Tea blog", "http://tea.example/", "tea")
	e.clock.Advance(45 * time.Minute) // the next hour
	extended("Late blog", "http://late.example/", "")
	e.clock.Set(start.Add(3*time.Hour + 5*time.Minute))

	path := archivePath(start)
	resp, doc := e.getChanges(path)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	var names, whens []string
	for _, w := range doc.Weblogs {
		names = append(names, w.Name)
		whens = append(whens, w.When)
	}
	if !slices.Equal(names, []string{"Tea blog", "Go blog"}) || !slices.Equal(whens, []string{"30", "50"}) || doc.Count != "2" {
		t.Errorf("archive of %s: names %v, when %v, count %s", path, names, whens, doc.Count)
	}
	if lm := resp.Header.Get("Last-Modified"); lm != start.Add(time.Hour).Format(http.TimeFormat) {
		t.Errorf("Last-Modified %q", lm)
	}
	if _, doc := e.getChanges(path + "?tag=XMPP"); len(doc.Weblogs) != 1 || doc.Weblogs[0].Name != "Go blog" {
		t.Errorf("archive filtered by tag: %+v", doc.Weblogs)
	}
	// An hour without pings is an empty document; the future, a date that
	// does not exist and an hour beyond the retention are 404.
	if _, doc := e.getChanges(archivePath(start.Add(-time.Hour))); doc == nil || len(doc.Weblogs) != 0 {
		t.Errorf("an empty hour: %+v", doc)
	}
	for _, p := range []string{
		archivePath(start.Add(5 * time.Hour)),
		"/2031/02/30/01.xml", "/2031/01/01/25.xml", "/2031/02/30/00.xml",
		archivePath(start.Add(-8 * 24 * time.Hour)),
	} {
		if resp, _ := e.getChanges(p); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}

	// changes.xml takes ?tag= too.
	e.clock.Set(start.Add(time.Hour + 20*time.Minute))
	if _, doc := e.getChanges("/changes.xml?tag=tea"); len(doc.Weblogs) != 1 || doc.Weblogs[0].Name != "Tea blog" {
		t.Errorf("changes.xml?tag=tea: %+v", doc.Weblogs)
	}
	if _, doc := e.getChanges("/changes.xml"); len(doc.Weblogs) != 2 { // the last hour: Tea and Late
		t.Errorf("changes.xml without a tag: %+v", doc.Weblogs)
	}
	// Too many tags is a fault of the ping, not a stored ping.
	many := ""
	for i := range 25 {
		many += fmt.Sprintf("t%d|", i)
	}
	_, v, err := e.rpc("weblogUpdates.extendedPing", "x", "http://x.example/", "http://x.example/c", "http://x.example/f", many)
	if err != nil {
		t.Fatal(err)
	}
	wantFlerror(t, v, true)
}

// TestArchiveHoursAsTheSeedNamesThem: "all pings received in the first
// hour of January 1st 2007 would be archived in …/2007/01/01/01.xml", so
// a day's hours are 01.xml to 24.xml (UTC); 00.xml, the first hour's
// earlier name, is a permanent redirect to 01.xml of the same day.
func TestArchiveHoursAsTheSeedNamesThem(t *testing.T) {
	e := newEnv(t)
	day := e.clock.Now().Truncate(24 * time.Hour).Add(-48 * time.Hour) // a whole UTC day, past and kept
	ping := func(at time.Time, name string) {
		t.Helper()
		e.clock.Set(at)
		_, v, err := e.rpc("weblogUpdates.ping", name, "http://"+strings.ToLower(strings.Fields(name)[0])+".example/")
		if err != nil {
			t.Fatal(err)
		}
		wantFlerror(t, v, false)
	}
	ping(day.Add(10*time.Minute), "First hour")
	ping(day.Add(time.Hour+5*time.Minute), "Second hour")
	ping(day.Add(23*time.Hour+30*time.Minute), "Last hour")
	e.clock.Set(day.Add(72 * time.Hour))

	date := day.Format("2006/01/02")
	names := func(doc *weblogUpdates) []string {
		var out []string
		for _, w := range doc.Weblogs {
			out = append(out, w.Name)
		}
		return out
	}
	for hour, want := range map[string][]string{
		"01": {"First hour"}, "02": {"Second hour"}, "24": {"Last hour"}, "23": nil,
	} {
		path := "/" + date + "/" + hour + ".xml"
		resp, doc := e.getChanges(path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", path, resp.StatusCode)
			continue
		}
		if got := names(doc); !slices.Equal(got, want) {
			t.Errorf("GET %s lists %v, want %v", path, got, want)
		}
	}
	// The end of the first hour is 01:00: Last-Modified and "updated".
	resp, doc := e.getChanges("/" + date + "/01.xml")
	if lm := resp.Header.Get("Last-Modified"); lm != day.Add(time.Hour).Format(http.TimeFormat) || doc.Updated != lm {
		t.Errorf("01.xml: Last-Modified %q, updated %q; want the end of the first hour", lm, doc.Updated)
	}
	if w := doc.Weblogs; len(w) != 1 || w[0].When != "50" {
		t.Errorf("01.xml: %+v, want the ping of 00:10, 50 minutes before the end of the hour", w)
	}

	// 00.xml moved to 01.xml of the same day, its query kept.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for query, want := range map[string]string{"": "01.xml", "?tag=go": "01.xml?tag=go"} {
		resp, err := noRedirect.Get(e.srv.URL + "/" + date + "/00.xml" + query)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, _ := resp.Location()
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != want ||
			loc == nil || loc.Path != "/"+date+"/01.xml" {
			t.Errorf("GET 00.xml%s: %d, Location %q, want 301 to %s", query, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
	if resp, doc := e.getChanges("/" + date + "/00.xml"); resp.StatusCode != http.StatusOK || !slices.Equal(names(doc), []string{"First hour"}) {
		t.Errorf("00.xml followed: %d %+v", resp.StatusCode, doc)
	}
}

// TestArchiveOfTheRunningHour: while an hour runs, its archive is as of
// the reading, as changes.xml is: "updated" is not in the future, "when"
// is the minutes since each ping, and its entity tag is weak ("updated"
// changes with each reading, the tag does not).
func TestArchiveOfTheRunningHour(t *testing.T) {
	e := newEnv(t)
	start := e.clock.Now().Truncate(time.Hour)
	e.clock.Set(start.Add(5 * time.Minute))
	if _, v, err := e.rpc("weblogUpdates.ping", "Now", "http://now.example/"); err != nil {
		t.Fatal(err)
	} else {
		wantFlerror(t, v, false)
	}
	e.clock.Advance(7 * time.Minute)
	resp, doc := e.getChanges(archivePath(start))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", archivePath(start), resp.StatusCode)
	}
	if doc.Updated != e.clock.Now().Format(http.TimeFormat) || len(doc.Weblogs) != 1 || doc.Weblogs[0].When != "7" {
		t.Errorf("running hour: updated %q, weblogs %+v; want updated %q and when 7",
			doc.Updated, doc.Weblogs, e.clock.Now().Format(http.TimeFormat))
	}
	if tag := resp.Header.Get("ETag"); !strings.HasPrefix(tag, "W/") || resp.Header.Get("Last-Modified") != "" {
		t.Errorf("running hour: ETag %q, Last-Modified %q; want a weak tag and no Last-Modified", tag, resp.Header.Get("Last-Modified"))
	}
}
