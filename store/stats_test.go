package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// StatusReport is held to the same expectations on both backends.

func TestStatusReportSQLite(t *testing.T) {
	testStatusReport(t, openSQLite(t))
}

func TestStatusReportPostgres(t *testing.T) {
	testenv.SkipWithoutPostgres(t)
	testStatusReport(t, openPostgres(t))
}

func TestStatusReportEmptySQLite(t *testing.T) {
	testStatusReportEmpty(t, openSQLite(t))
}

func TestStatusReportEmptyPostgres(t *testing.T) {
	testenv.SkipWithoutPostgres(t)
	testStatusReportEmpty(t, openPostgres(t))
}

// statusT0 is the fixed clock reading the report's data is written at.
var statusT0 = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)

func statusFatal(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// statusSource makes a source and nodes following it, and stores the fetch
// state st (URL defaults to the source's own).
func statusSource(t *testing.T, s store.Store, url string, st hub.SourceState, nodes ...*hub.Node) *hub.Source {
	t.Helper()
	ctx := context.Background()
	src, _, err := s.EnsureSource(ctx, url)
	statusFatal(t, err)
	for _, n := range nodes {
		n.SourceID = src.ID
		if n.Title == "" && n.AccessModel == "" && n.MaxItems == 0 {
			n.NodeConfig = hub.DefaultNodeConfig()
		}
		statusFatal(t, s.CreateNode(ctx, n))
	}
	if st.URL == "" {
		st.URL = url
	}
	_, err = s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st})
	statusFatal(t, err)
	return src
}

func statusSub(t *testing.T, s store.Store, node *hub.Node, kind hub.Kind, addr string, state hub.SubState, ds hub.DeliveryState) *hub.Subscription {
	t.Helper()
	ctx := context.Background()
	sub := &hub.Subscription{NodeID: node.ID, Kind: kind, Address: addr, State: state}
	if kind == hub.KindXMPP {
		sub.BareJID = addr
	}
	sub.Cursor = ds.Cursor
	_, err := s.PutSubscription(ctx, sub)
	statusFatal(t, err)
	statusFatal(t, s.SaveDeliveryState(ctx, sub.ID, ds))
	return sub
}

func testStatusReport(t *testing.T, s store.Store) {
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	t0 := statusT0

	// Sources in every state, each followed by a node.
	okNode := &hub.Node{Name: "ok"}
	statusSource(t, s, "https://example.org/ok.xml", hub.SourceState{
		Baselined: true, IsFeed: true, Title: "OK feed", LastFetchAt: t0.Add(-time.Minute), LastStatus: 200,
		NextFetchAt: t0.Add(time.Hour), NextFetchReason: "ttl 60m",
	}, okNode)
	failNode := &hub.Node{Name: "failing", NodeConfig: hub.NodeConfig{AccessModel: hub.AccessWhitelist,
		MaxItems: 10, NotificationType: hub.NotifyHeadline}}
	statusSource(t, s, "https://private.example.org/feed?key=k", hub.SourceState{
		LastFetchAt: t0.Add(-2 * time.Minute), LastStatus: 503, LastError: "503 Service Unavailable",
		ConsecutiveErrors: 4, NextFetchAt: t0.Add(-30 * time.Minute), NextFetchReason: "backoff after 4 errors",
	}, failNode)
	goneNode := &hub.Node{Name: "gone"}
	statusSource(t, s, "https://example.org/gone.xml", hub.SourceState{
		Baselined: true, Gone: true, LastFetchAt: t0.Add(-time.Hour), LastStatus: 410,
	}, goneNode)
	movedNode := &hub.Node{Name: "moved"}
	statusSource(t, s, "https://old.example.org/feed.xml", hub.SourceState{
		URL: "https://new.example.org/feed.xml", MovedFrom: "https://old.example.org/feed.xml", MovedAt: t0.Add(-time.Hour),
		Baselined: true, LastFetchAt: t0.Add(-time.Hour), LastStatus: 200, NextFetchAt: t0.Add(time.Hour),
	}, movedNode)
	fresh := &hub.Node{Name: "new"}
	statusSource(t, s, "https://example.org/new.xml", hub.SourceState{
		NextFetchAt: t0, NextFetchReason: hub.ReasonNewSource,
	}, fresh)
	// A source no node follows is not part of the report.
	_, _, err := s.EnsureSource(ctx, "https://example.org/unfollowed.xml")
	statusFatal(t, err)
	quiet := &hub.Node{Name: "quiet", NodeConfig: hub.DefaultNodeConfig()}
	statusFatal(t, s.CreateNode(ctx, quiet))

	// Two events on "ok" and one on "quiet": the XMPP stream has sent none.
	_, err = s.Append(ctx, okNode.ID, []hub.Event{{Kind: hub.EventItem, ItemID: "1"}, {Kind: hub.EventItem, ItemID: "2"}})
	statusFatal(t, err)
	_, err = s.Append(ctx, quiet.ID, []hub.Event{{Kind: hub.EventItem, ItemID: "1"}})
	statusFatal(t, err)

	// Subscriptions of every kind, in every delivery state.
	statusSub(t, s, okNode, hub.KindXMPP, "reader@example.org", hub.SubActive, hub.DeliveryState{})
	statusSub(t, s, okNode, hub.KindXMPP, "other@example.org", hub.SubActive, hub.DeliveryState{})
	statusSub(t, s, okNode, hub.KindWebhook, "http://127.0.0.1/fine", hub.SubActive, hub.DeliveryState{Cursor: 2})
	failing := statusSub(t, s, okNode, hub.KindWebhook, "http://127.0.0.1/failing", hub.SubActive, hub.DeliveryState{
		Cursor: 1, Attempts: 3, ConsecutiveErrors: 3, FirstFailureAt: t0.Add(-time.Hour), NextAttemptAt: t0.Add(time.Minute),
		LastError: "POST http://127.0.0.1/failing: 500", LastStatus: 500,
	})
	behind := statusSub(t, s, okNode, hub.KindWebSub, "http://127.0.0.1/behind", hub.SubActive, hub.DeliveryState{})
	suspended := statusSub(t, s, failNode, hub.KindRSSCloud, "http://127.0.0.1/suspended", hub.SubActive, hub.DeliveryState{
		ConsecutiveErrors: 3, FirstFailureAt: t0.Add(-3 * time.Hour), LastError: "connection refused",
	})
	statusFatal(t, s.SetSubscriptionState(ctx, suspended.ID, hub.SubSuspended, time.Time{}))
	statusSub(t, s, goneNode, hub.KindCNWS, "http://127.0.0.1/pending", hub.SubPending, hub.DeliveryState{})
	quietSub := statusSub(t, s, quiet, hub.KindWebSub, "http://127.0.0.1/quiet", hub.SubActive, hub.DeliveryState{})

	// Pings: three in the last hour, one older.
	for i, ago := range []time.Duration{2 * time.Hour, 30 * time.Minute, 20 * time.Minute, 10 * time.Minute} {
		statusFatal(t, s.RecordPing(ctx, &hub.Ping{Dialect: "rest", URL: fmt.Sprintf("https://example.org/p%d", i),
			Remote: "192.0.2.1", ReceivedAt: t0.Add(-ago)}))
	}

	// The fetcher has claimed the failing source, due the longest; the
	// new one waits.
	claimed, err := s.ClaimDueSources(ctx, t0, 1, "other-process", t0.Add(time.Minute))
	statusFatal(t, err)
	if len(claimed) != 1 || claimed[0].URL != "https://private.example.org/feed?key=k" {
		t.Fatalf("claimed %+v", claimed)
	}

	rep, err := s.StatusReport(ctx, store.StatusQuery{PingsSince: t0.Add(-time.Hour), LateBefore: t0.Add(-5 * time.Minute), Now: t0})
	statusFatal(t, err)
	if rep.FetchDue != 1 || rep.FetchRunning != 1 || !rep.FetchOldestDue.Equal(t0.Add(-30*time.Minute)) {
		t.Errorf("fetch load: due %d, running %d, oldest due %v; want 1, 1, %v",
			rep.FetchDue, rep.FetchRunning, rep.FetchOldestDue, t0.Add(-30*time.Minute))
	}

	// Totals.
	if rep.NodesTotal != 6 || rep.NodesBehindXMPP != 2 || rep.EventsBehindXMPP != 3 {
		t.Errorf("nodes: total %d, behind XMPP %d by %d events; want 6, 2, 3", rep.NodesTotal, rep.NodesBehindXMPP, rep.EventsBehindXMPP)
	}
	wantKinds := map[hub.Kind]int{hub.KindXMPP: 2, hub.KindWebhook: 2, hub.KindWebSub: 2, hub.KindRSSCloud: 1, hub.KindCNWS: 1}
	if fmt.Sprint(rep.Subscribers) != fmt.Sprint(wantKinds) {
		t.Errorf("subscribers by kind = %v, want %v", rep.Subscribers, wantKinds)
	}
	if rep.SourcesTotal != 5 || rep.SourcesFailing != 1 || rep.SourcesGone != 1 || rep.SourcesMoved != 1 || rep.SourcesLate != 1 {
		t.Errorf("sources: total %d failing %d gone %d moved %d late %d; want 5 1 1 1 1",
			rep.SourcesTotal, rep.SourcesFailing, rep.SourcesGone, rep.SourcesMoved, rep.SourcesLate)
	}
	wantQueue := store.QueueStatus{Subscriptions: 6, Pending: 1, Suspended: 1, Failing: 2, Behind: 3, EventsBehind: 4,
		Problems: 4, OldestFailure: t0.Add(-3 * time.Hour)}
	if !rep.Queue.OldestFailure.Equal(wantQueue.OldestFailure) {
		t.Errorf("oldest failure %v, want %v", rep.Queue.OldestFailure, wantQueue.OldestFailure)
	}
	rep.Queue.OldestFailure = wantQueue.OldestFailure
	if rep.Queue != wantQueue {
		t.Errorf("queue = %+v, want %+v", rep.Queue, wantQueue)
	}
	if rep.PingsRecent != 3 || rep.PingsTotal != 4 {
		t.Errorf("pings: recent %d, total %d; want 3, 4", rep.PingsRecent, rep.PingsTotal)
	}

	// Nodes: those with failing or suspended subscriptions first, then a
	// failing or gone source, then behind, then the rest; by name within.
	// "quiet" is behind: its WebSub subscriber and the XMPP stream.
	var names []string
	for _, n := range rep.Nodes {
		names = append(names, n.Name)
	}
	if want := []string{"failing", "ok", "gone", "quiet", "moved", "new"}; !slices.Equal(names, want) {
		t.Errorf("nodes in order %q, want %q", names, want)
	}
	ok := rep.Nodes[slices.IndexFunc(rep.Nodes, func(n store.NodeStatus) bool { return n.Name == "ok" })]
	wantOK := map[hub.Kind]int{hub.KindXMPP: 2, hub.KindWebhook: 2, hub.KindWebSub: 1, hub.KindRSSCloud: 0, hub.KindCNWS: 0}
	if fmt.Sprint(ok.Subscribers) != fmt.Sprint(wantOK) || ok.Failing != 1 || ok.Behind != 2 || ok.Suspended != 0 ||
		ok.LastSeq != 2 || ok.XMPPSeq != 0 || ok.SourceURL != "https://example.org/ok.xml" || ok.SourceFailing || ok.AccessModel != hub.AccessOpen {
		t.Errorf("node ok = %+v", ok)
	}
	fn := rep.Nodes[0]
	if fn.AccessModel != hub.AccessWhitelist || !fn.SourceFailing || fn.Suspended != 1 || fn.SourceGone {
		t.Errorf("node failing = %+v", fn)
	}
	if g := rep.Nodes[2]; !g.SourceGone {
		t.Errorf("node gone = %+v", g)
	}

	// Sources: failing, gone, never fetched, moved, fine.
	var urls []string
	for _, src := range rep.Sources {
		urls = append(urls, src.URL)
	}
	wantURLs := []string{"https://private.example.org/feed?key=k", "https://example.org/gone.xml",
		"https://example.org/new.xml", "https://new.example.org/feed.xml", "https://example.org/ok.xml"}
	if !slices.Equal(urls, wantURLs) {
		t.Errorf("sources in order %q, want %q", urls, wantURLs)
	}
	if len(rep.Sources) == len(wantURLs) {
		f, g, m, o := rep.Sources[0], rep.Sources[1], rep.Sources[3], rep.Sources[4]
		if f.ConsecutiveErrors != 4 || f.LastStatus != 503 || f.LastError != "503 Service Unavailable" || f.Open ||
			f.Nodes != 1 || !f.NextFetchAt.Equal(t0.Add(-30*time.Minute)) || f.NextFetchReason != "backoff after 4 errors" {
			t.Errorf("failing source = %+v", f)
		}
		if !g.Gone || g.LastStatus != 410 || !g.Open {
			t.Errorf("gone source = %+v", g)
		}
		if m.MovedFrom != "https://old.example.org/feed.xml" || m.OriginalURL != "https://old.example.org/feed.xml" || !m.MovedAt.Equal(t0.Add(-time.Hour)) {
			t.Errorf("moved source = %+v", m)
		}
		if !o.Baselined || !o.IsFeed || o.Title != "OK feed" || !o.LastFetchAt.Equal(t0.Add(-time.Minute)) || o.LastStatus != 200 {
			t.Errorf("fine source = %+v", o)
		}
	}

	// Deliveries: the suspended one (oldest failure), the failing one,
	// then the ones behind, furthest first; the pending one and the fine
	// ones are not problems.
	var ids []int64
	for _, d := range rep.Deliveries {
		ids = append(ids, d.ID)
	}
	if want := []int64{suspended.ID, failing.ID, behind.ID, quietSub.ID}; !slices.Equal(ids, want) {
		t.Errorf("deliveries %v, want %v", ids, want)
	} else {
		d := rep.Deliveries[1]
		if d.NodeName != "ok" || d.Kind != hub.KindWebhook || d.Address != "http://127.0.0.1/failing" || d.State != hub.SubActive ||
			d.Cursor != 1 || d.NodeLastSeq != 2 || d.ConsecutiveErrors != 3 || d.LastStatus != 500 ||
			!d.FirstFailureAt.Equal(t0.Add(-time.Hour)) || !d.NextAttemptAt.Equal(t0.Add(time.Minute)) || d.LastError == "" {
			t.Errorf("failing delivery = %+v", d)
		}
		if rep.Deliveries[0].State != hub.SubSuspended {
			t.Errorf("suspended delivery = %+v", rep.Deliveries[0])
		}
	}

	// Pings: the recent ones, newest first.
	if len(rep.Pings) != 3 || rep.Pings[0].URL != "https://example.org/p3" || rep.Pings[2].URL != "https://example.org/p1" ||
		rep.Pings[0].Remote != "192.0.2.1" || !rep.Pings[0].ReceivedAt.Equal(t0.Add(-10*time.Minute)) {
		t.Errorf("pings = %+v", rep.Pings)
	}
	if rep.RecentSubscribers != nil {
		t.Errorf("subscribers listed without being asked for: %+v", rep.RecentSubscribers)
	}

	// Each list under a limit is the first rows of the whole one (each
	// kind of problem is read up to the limit on its own).
	wantNodes, wantSources := names, urls
	for limit := 1; limit <= 7; limit++ {
		rep, err := s.StatusReport(ctx, store.StatusQuery{Limit: limit, PingsSince: t0.Add(-time.Hour)})
		statusFatal(t, err)
		var gotNodes, gotSources []string
		for _, n := range rep.Nodes {
			gotNodes = append(gotNodes, n.Name)
		}
		for _, src := range rep.Sources {
			gotSources = append(gotSources, src.URL)
		}
		if !slices.Equal(gotNodes, wantNodes[:min(limit, len(wantNodes))]) ||
			!slices.Equal(gotSources, wantSources[:min(limit, len(wantSources))]) {
			t.Errorf("limit %d: nodes %q, sources %q", limit, gotNodes, gotSources)
		}
	}

	// A limit caps every list and leaves the totals alone.
	rep, err = s.StatusReport(ctx, store.StatusQuery{Limit: 2, PingsSince: t0.Add(-time.Hour), Subscribers: true})
	statusFatal(t, err)
	if len(rep.Nodes) != 2 || len(rep.Sources) != 2 || len(rep.Deliveries) != 2 || len(rep.Pings) != 2 || len(rep.RecentSubscribers) != 2 {
		t.Errorf("limit 2: %d nodes, %d sources, %d deliveries, %d pings, %d subscribers",
			len(rep.Nodes), len(rep.Sources), len(rep.Deliveries), len(rep.Pings), len(rep.RecentSubscribers))
	}
	if rep.NodesTotal != 6 || rep.SourcesTotal != 5 || rep.Queue.Problems != 4 || rep.PingsRecent != 3 || rep.SourcesLate != 0 {
		t.Errorf("limit 2 changed the totals: %+v", rep)
	}
	if len(rep.RecentSubscribers) == 2 {
		r := rep.RecentSubscribers[0]
		if r.NodeName != "quiet" || r.Kind != hub.KindWebSub || r.Address != "http://127.0.0.1/quiet" || r.State != hub.SubActive || r.CreatedAt.IsZero() {
			t.Errorf("newest subscriber = %+v", r)
		}
	}

	// Without a PingsSince every ping counts.
	rep, err = s.StatusReport(ctx, store.StatusQuery{})
	statusFatal(t, err)
	if rep.PingsRecent != 4 || len(rep.Pings) != 4 {
		t.Errorf("all pings: %d counted, %d listed; want 4", rep.PingsRecent, len(rep.Pings))
	}
}

func testStatusReportEmpty(t *testing.T, s store.Store) {
	t.Cleanup(func() { s.Close() })
	rep, err := s.StatusReport(context.Background(), store.StatusQuery{Subscribers: true})
	statusFatal(t, err)
	if rep.NodesTotal != 0 || rep.SourcesTotal != 0 || rep.Queue != (store.QueueStatus{}) || rep.PingsTotal != 0 ||
		len(rep.Nodes)+len(rep.Sources)+len(rep.Deliveries)+len(rep.Pings)+len(rep.RecentSubscribers) != 0 {
		t.Errorf("empty store: %+v", rep)
	}
	for _, k := range hub.Kinds {
		if n, ok := rep.Subscribers[k]; !ok || n != 0 {
			t.Errorf("subscribers of kind %s: %d, %v", k, n, ok)
		}
	}
}

// BenchmarkStatusReportSQLite measures one status report of an
// installation of 500 nodes with 10 subscribers each (a tenth of them
// failing) and as many sources.
func BenchmarkStatusReportSQLite(b *testing.B) {
	ctx := context.Background()
	s, err := store.Open(ctx, filepath.Join(b.TempDir(), "pingd.db"), store.Options{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range 500 {
		src, _, err := s.EnsureSource(ctx, fmt.Sprintf("https://example.org/%d.xml", i))
		if err != nil {
			b.Fatal(err)
		}
		n := &hub.Node{Name: fmt.Sprintf("node-%d", i), NodeConfig: hub.DefaultNodeConfig(), SourceID: src.ID}
		if err := s.CreateNode(ctx, n); err != nil {
			b.Fatal(err)
		}
		for j := range 10 {
			sub := &hub.Subscription{NodeID: n.ID, Kind: hub.Kinds[j%len(hub.Kinds)], Address: fmt.Sprintf("http://127.0.0.1/%d/%d", i, j),
				BareJID: "x@example.org", State: hub.SubActive}
			if _, err := s.PutSubscription(ctx, sub); err != nil {
				b.Fatal(err)
			}
			if j == 1 && i%10 == 0 { // a webhook
				if err := s.SaveDeliveryState(ctx, sub.ID, hub.DeliveryState{ConsecutiveErrors: 1, FirstFailureAt: statusT0}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	q := store.StatusQuery{PingsSince: statusT0.Add(-time.Hour), LateBefore: statusT0, Subscribers: true}
	for b.Loop() {
		if _, err := s.StatusReport(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
}
