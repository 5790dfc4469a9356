package httpapi

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

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

	path := fmt.Sprintf("/%s.xml", start.Format("2006/01/02/15"))
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
	if _, doc := e.getChanges(fmt.Sprintf("/%s.xml", start.Add(-time.Hour).Format("2006/01/02/15"))); doc == nil || len(doc.Weblogs) != 0 {
		t.Errorf("an empty hour: %+v", doc)
	}
	for _, p := range []string{
		fmt.Sprintf("/%s.xml", start.Add(5*time.Hour).Format("2006/01/02/15")),
		"/2031/02/30/01.xml", "/2031/01/01/24.xml",
		fmt.Sprintf("/%s.xml", start.Add(-8*24*time.Hour).Format("2006/01/02/15")),
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
