package hub_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
)

// Polling fallback: with the fake clock the tests move to just before and
// at each due time, and a sentinel source whose fetch shows that the fetch
// loop looked for due sources at that time.

// pollEnv is an env running its fetch loop, with a sentinel and a node
// "n" following /feed that has a subscriber, both baselined at t0.
func pollEnv(t *testing.T, doc rss) (e *env, feed *feedDoc, n, sentinel *hub.Node) {
	t.Helper()
	e = newEnv(t, envOptions{})
	feed = e.origin.serve("/feed", doc.String(), false)
	e.run()
	sentinel = e.createNode("sentinel", "/sentinel")
	e.waitFetched(sentinel.SourceID)
	n = e.createNode("n", "/feed")
	e.waitFetched(n.SourceID)
	if _, _, err := e.hub.Subscribe(t.Context(), hub.Subscription{NodeName: "n", Kind: hub.KindXMPP,
		Address: "reader@example.org/x", BareJID: "reader@example.org"}); err != nil {
		t.Fatal(err)
	}
	return e, feed, n, sentinel
}

// expectPoll checks the source's schedule, checks that the loop leaves it
// alone a second before, and lets it fetch at the due time.
func expectPoll(t *testing.T, e *env, n, sentinel *hub.Node, at time.Time, reason string) *hub.Source {
	t.Helper()
	src := e.source(n.SourceID)
	if !src.NextFetchAt.Equal(at) || src.NextFetchReason != reason {
		t.Fatalf("next fetch %s (%s), want %s (%s)", src.NextFetchAt.Format(time.DateTime), src.NextFetchReason,
			at.Format(time.DateTime), reason)
	}
	hits := e.origin.hitCount("/feed")
	e.clock.Set(at.Add(-time.Second))
	e.settle(sentinel.SourceID)
	if got := e.origin.hitCount("/feed"); got != hits {
		t.Fatalf("polled at %s, before it was due at %s", e.clock.Now().Format(time.DateTime), at.Format(time.DateTime))
	}
	e.clock.Set(at)
	e.hub.WakeFetcher()
	src = e.waitFetched(n.SourceID)
	if got := e.origin.hitCount("/feed"); got != hits+1 {
		t.Fatalf("%d fetches at the due time, want 1", got-hits)
	}
	return src
}

func TestPollingFollowsTTL(t *testing.T) {
	doc := rss{title: "Feed", ttl: 30, items: items("a")}
	e, feed, n, sentinel := pollEnv(t, doc)

	// Learning of the source is not a ping: its ttl decides.
	src := e.source(n.SourceID)
	if !src.LastPingAt.IsZero() {
		t.Errorf("creating the node recorded a ping at %v", src.LastPingAt)
	}
	src = expectPoll(t, e, n, sentinel, t0.Add(30*time.Minute), "ttl")
	if src.Unchanged != 1 {
		t.Errorf("unchanged %d, want 1", src.Unchanged)
	}
	// Two unchanged polls in a row slow down by half...
	src = expectPoll(t, e, n, sentinel, src.LastFetchAt.Add(30*time.Minute), "ttl")
	feed.set(rss{title: "Feed", ttl: 30, items: items("b", "a")}.String())
	src = expectPoll(t, e, n, sentinel, src.LastFetchAt.Add(45*time.Minute), "unchanged backoff")
	// ...and a change returns to the ttl at once, publishing what is new.
	if got := itemIDs(e.events(n.ID)); !slices.Equal(got, []string{"b"}) {
		t.Errorf("the poll published %v, want [b]", got)
	}
	expectPoll(t, e, n, sentinel, src.LastFetchAt.Add(30*time.Minute), "ttl")
}

func TestPingedSourceIsPolledAtThePingedInterval(t *testing.T) {
	version := 0
	next := func() string {
		version++
		ids := []string{fmt.Sprint(version), "a"}
		return rss{title: "Feed", ttl: 30, items: items(ids...)}.String()
	}
	e, feed, n, sentinel := pollEnv(t, rss{title: "Feed", ttl: 30, items: items("a")})

	feed.set(next())
	src := e.ping(n.SourceID, e.origin.url("/feed"), nil)
	pingedAt := e.clock.Now()
	if !src.LastPingAt.Equal(pingedAt) {
		t.Errorf("last ping %v, want %v", src.LastPingAt, pingedAt)
	}
	// A source that pings is only polled as a safety net (12h by default),
	// not at its ttl.
	feed.set(next())
	src = expectPoll(t, e, n, sentinel, pingedAt.Add(12*time.Hour), "pinged source")

	// A week without pings, and the ttl decides again.
	e.clock.Set(pingedAt.Add(8 * 24 * time.Hour))
	feed.set(next())
	e.hub.WakeFetcher()
	src = e.waitFetched(n.SourceID)
	if want := e.clock.Now().Add(30 * time.Minute); !src.NextFetchAt.Equal(want) || src.NextFetchReason != "ttl" {
		t.Errorf("a week after the last ping: next fetch %v (%s), want %v (ttl)", src.NextFetchAt, src.NextFetchReason, want)
	}
	if got := itemIDs(e.events(n.ID)); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Errorf("items %v, want [1 2 3]", got)
	}
}

func TestSkipHoursDeferPolls(t *testing.T) {
	// t0 is 10:00 UTC: the hourly poll falls at 11:00, which the feed asks
	// to skip together with 12:00.
	doc := rss{title: "Feed", ttl: 60, skipHours: []int{11, 12}, items: items("a")}
	e, _, n, sentinel := pollEnv(t, doc)

	hits := e.origin.hitCount("/feed")
	e.clock.Set(t0.Add(time.Hour))
	e.settle(sentinel.SourceID)
	if e.origin.hitCount("/feed") != hits {
		t.Fatalf("polled at 11:00, a skipped hour")
	}
	src := expectPoll(t, e, n, sentinel, t0.Add(3*time.Hour), "skipHours")
	if src.LastFetchAt.Hour() != 13 {
		t.Errorf("polled at %v, want 13:00", src.LastFetchAt)
	}
	expectPoll(t, e, n, sentinel, t0.Add(4*time.Hour), "ttl")
}
