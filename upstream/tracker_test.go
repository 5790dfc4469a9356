package upstream

import (
	"errors"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
)

// everyMinute is a scheduler that always polls a minute later.
type everyMinute struct{}

func (everyMinute) Next(now time.Time, _ *hub.Source, _ *hub.FetchResult, _ error) (time.Time, string) {
	return now.Add(time.Minute), "inner"
}

func TestTrackerSafetyNet(t *testing.T) {
	tr := NewTracker(everyMinute{}, 6*time.Hour)
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	src := &hub.Source{ID: 7, SourceState: hub.SourceState{URL: "http://example.org/feed"}}
	body := []byte(`<feed xmlns="http://www.w3.org/2005/Atom"><link rel="hub" href="http://hub.example.org/"/></feed>`)
	res := &hub.FetchResult{Status: 200, Body: body, IsFeed: true}

	// No push yet: the inner scheduler decides; the advertisement is noted once.
	if next, reason := tr.Next(now, src, res, nil); !next.Equal(now.Add(time.Minute)) || reason != "inner" {
		t.Errorf("without a push: %v %s", next, reason)
	}
	ads := tr.takeAdverts()
	if len(ads) != 1 || ads[0].hub != "http://hub.example.org/" || ads[0].feedURL != src.URL {
		t.Fatalf("adverts %+v", ads)
	}
	tr.Next(now, src, res, nil)
	if ads := tr.takeAdverts(); len(ads) != 0 {
		t.Errorf("an unchanged body was noted again: %+v", ads)
	}

	// With a push in force: the safety net, unless the fetch failed.
	tr.setActive([]hub.Upstream{{SourceID: 7, State: hub.UpstreamActive}, {SourceID: 8, State: hub.UpstreamPending}})
	if next, reason := tr.Next(now, src, nil, nil); !next.Equal(now.Add(6*time.Hour)) || reason != ReasonSafetyNet {
		t.Errorf("with a push: %v %s", next, reason)
	}
	if next, _ := tr.Next(now, src, nil, errors.New("boom")); !next.Equal(now.Add(time.Minute)) {
		t.Errorf("after an error the inner scheduler's retry stands: %v", next)
	}
	other := &hub.Source{ID: 8}
	if next, _ := tr.Next(now, other, nil, nil); !next.Equal(now.Add(time.Minute)) {
		t.Errorf("a pending push does not slow polling: %v", next)
	}
	// A body without push links is not an advertisement.
	tr.forget(7)
	tr.Next(now, src, &hub.FetchResult{Body: []byte(`<feed xmlns="http://www.w3.org/2005/Atom"/>`), IsFeed: true}, nil)
	if ads := tr.takeAdverts(); len(ads) != 0 {
		t.Errorf("adverts from a feed without links: %+v", ads)
	}
}

// TestTrackerLinkHeaderHub: a hub named only in the answer's Link header
// is an advertisement, for a feed and for a resource that is not one;
// the header's hub and self win over the body's.
func TestTrackerLinkHeaderHub(t *testing.T) {
	tr := NewTracker(everyMinute{}, 6*time.Hour)
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	src := &hub.Source{ID: 7, SourceState: hub.SourceState{URL: "http://example.org/feed"}}
	plain := []byte(`<feed xmlns="http://www.w3.org/2005/Atom"><title>no links</title></feed>`)
	links := []hub.HeaderLink{{URL: "http://hub.example.org/", Rels: []string{"hub"}}, {URL: "http://example.org/canonical", Rels: []string{"self"}}}

	tr.Next(now, src, &hub.FetchResult{Status: 200, Body: plain, IsFeed: true, Links: links}, nil)
	ads := tr.takeAdverts()
	if len(ads) != 1 || ads[0].hub != "http://hub.example.org/" || ads[0].self != "http://example.org/canonical" {
		t.Fatalf("a feed with its hub in the Link header: adverts %+v", ads)
	}

	// The same body with other header links is looked at again; the
	// header's hub and self win over the body's.
	withBodyHub := []byte(`<feed xmlns="http://www.w3.org/2005/Atom"><link rel="hub" href="http://body-hub.example.org/"/><link rel="self" href="http://example.org/body-self"/></feed>`)
	tr.Next(now, src, &hub.FetchResult{Status: 200, Body: withBodyHub, IsFeed: true}, nil)
	if ads := tr.takeAdverts(); len(ads) != 1 || ads[0].hub != "http://body-hub.example.org/" || ads[0].self != "http://example.org/body-self" {
		t.Fatalf("the body's links alone: %+v", ads)
	}
	tr.Next(now, src, &hub.FetchResult{Status: 200, Body: withBodyHub, IsFeed: true, Links: links}, nil)
	if ads := tr.takeAdverts(); len(ads) != 1 || ads[0].hub != "http://hub.example.org/" || ads[0].self != "http://example.org/canonical" {
		t.Fatalf("header and body: %+v", ads)
	}

	// A document that is not a feed advertises a hub only by its header.
	doc := &hub.Source{ID: 8, SourceState: hub.SourceState{URL: "http://example.org/data.json"}}
	tr.Next(now, doc, &hub.FetchResult{Status: 200, Body: []byte(`{"a":1}`)}, nil)
	if ads := tr.takeAdverts(); len(ads) != 0 {
		t.Fatalf("a plain document without links: %+v", ads)
	}
	tr.Next(now, doc, &hub.FetchResult{Status: 200, Body: []byte(`{"a":1}`), Links: links[:1]}, nil)
	if ads := tr.takeAdverts(); len(ads) != 1 || ads[0].hub != "http://hub.example.org/" || ads[0].feedURL != doc.URL {
		t.Fatalf("a plain document with a hub header: %+v", ads)
	}
}
