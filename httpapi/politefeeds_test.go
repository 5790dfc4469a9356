package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/beevik/etree"
	"github.com/mmcdole/gofeed"
)

// TestPoliteNodeFeeds: the node's own feeds carry the GetPingd descriptor
// link, a ttl, and the polling hints its owner sets, read back by a feed
// parser and an XML tree.
func TestPoliteNodeFeeds(t *testing.T) {
	e := newEnv(t)
	resp := e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": "polite", "title": "Polite",
		"polling": map[string]any{"ttl_minutes": 120, "skip_hours": []int{0, 1, 2}, "skip_days": []string{"saturday", "Sunday"},
			"update_period": "daily", "update_frequency": 2}})
	if resp.StatusCode != http.StatusCreated {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	resp.Body.Close()

	get := func(path string) []byte {
		t.Helper()
		resp := e.do(http.MethodGet, path, "", nil)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		return body
	}
	rss := get("/rss/polite")
	parsed, err := gofeed.NewParser().ParseString(string(rss))
	if err != nil {
		t.Fatalf("gofeed: %v\n%s", err, rss)
	}
	if parsed.Title != "Polite" {
		t.Errorf("title %q", parsed.Title)
	}
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(rss); err != nil {
		t.Fatal(err)
	}
	ch := doc.FindElement("/rss/channel")
	text := func(path string) string {
		if el := ch.FindElement(path); el != nil {
			return el.Text()
		}
		return ""
	}
	var hours, days []string
	for _, h := range ch.FindElements("skipHours/hour") {
		hours = append(hours, h.Text())
	}
	for _, d := range ch.FindElements("skipDays/day") {
		days = append(days, d.Text())
	}
	if text("ttl") != "120" || !slices.Equal(hours, []string{"0", "1", "2"}) || !slices.Equal(days, []string{"Saturday", "Sunday"}) {
		t.Errorf("ttl %q, skipHours %v, skipDays %v", text("ttl"), hours, days)
	}
	if sy := ch.FindElement("sy:updatePeriod"); sy == nil || sy.NamespaceURI() != "http://purl.org/rss/1.0/modules/syndication/" || sy.Text() != "daily" || text("sy:updateFrequency") != "2" {
		t.Errorf("syndication elements missing or in the wrong namespace:\n%s", rss)
	}
	if !hasLink(ch, "getpingd.updates.descriptor", "http://pingd.test:8080/feeds/polite") {
		t.Errorf("no descriptor link in the RSS feed:\n%s", rss)
	}

	atom := get("/atom/polite")
	if _, err := gofeed.NewParser().ParseString(string(atom)); err != nil {
		t.Fatalf("gofeed on the Atom feed: %v", err)
	}
	adoc := etree.NewDocument()
	if err := adoc.ReadFromBytes(atom); err != nil {
		t.Fatal(err)
	}
	f := adoc.Root()
	if !hasLink(f, "getpingd.updates.descriptor", "http://pingd.test:8080/feeds/polite") {
		t.Errorf("no descriptor link in the Atom feed:\n%s", atom)
	}
	if sy := f.FindElement("sy:updatePeriod"); sy == nil || sy.Text() != "daily" {
		t.Errorf("no sy:updatePeriod in the Atom feed:\n%s", atom)
	}

	// PATCH changes the hints (and the feed's ETag with them); bad hints are 400.
	etag := e.do(http.MethodGet, "/rss/polite", "", nil).Header.Get("ETag")
	resp = e.admin(http.MethodPatch, "/api/nodes/polite", map[string]any{"polling": map[string]any{"ttl_minutes": 15}})
	var node struct {
		Polling struct {
			TTL int `json:"ttl_minutes"`
		} `json:"polling"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&node); err != nil || resp.StatusCode != http.StatusOK || node.Polling.TTL != 15 {
		t.Fatalf("PATCH: %d %+v %v", resp.StatusCode, node, err)
	}
	resp.Body.Close()
	after := get("/rss/polite")
	if !strings.Contains(string(after), "<ttl>15</ttl>") || strings.Contains(string(after), "skipHours") {
		t.Errorf("after PATCH:\n%s", after)
	}
	if e.do(http.MethodGet, "/rss/polite", "", nil).Header.Get("ETag") == etag {
		t.Error("the ETag did not change with the hints")
	}
	for _, bad := range []map[string]any{
		{"polling": map[string]any{"skip_hours": []int{24}}},
		{"polling": map[string]any{"update_period": "fortnightly"}},
		{"access_model": "secret"},
	} {
		resp := e.admin(http.MethodPatch, "/api/nodes/polite", bad)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("PATCH %v: %d, want 400 or 422", bad, resp.StatusCode)
		}
	}
}

func hasLink(parent *etree.Element, rel, href string) bool {
	for _, l := range parent.ChildElements() {
		if l.Tag == "link" && l.SelectAttrValue("rel", "") == rel && l.SelectAttrValue("href", "") == href {
			return true
		}
	}
	return false
}
