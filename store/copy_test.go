package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// TestCopySQLiteToPostgres fills every table of an SQLite database through
// the Store, copies it to PostgreSQL, and reads both back through the
// Store: the same rows, ids, times and bytes, and new rows after the copy
// get fresh ids and sequence numbers.
func TestCopySQLiteToPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	target := testenv.PostgresURL(t)
	path := filepath.Join(t.TempDir(), "pingd.db")
	src, err := store.Open(ctx, path, store.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	fillEveryTable(t, ctx, src)

	// The source stays open and in use while it is copied, as a running
	// pingd's would.
	report, err := store.Copy(ctx, "sqlite:"+path, target, store.CopyOptions{Options: store.Options{Logger: quietLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range report.Tables {
		if tc.Rows == 0 {
			t.Errorf("table %s: nothing copied; the test must fill every table", tc.Table)
		}
	}
	if len(report.Tables) != 14 || report.Replaced || report.SchemaVersion < 1 {
		t.Fatalf("report = %+v", report)
	}

	dst, err := store.Open(ctx, target, store.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if a, b := dumpStore(t, ctx, src), dumpStore(t, ctx, dst); a != b {
		t.Fatalf("the copy differs from the source\nsource: %s\ncopy:   %s", a, b)
	}
	// The bodies and item events were copied compressed, as stored, and
	// read back the same (the dumps hold them decoded).
	for _, dsn := range []struct{ driver, name string }{{"sqlite", path}, {"pgx", target}} {
		db, err := sql.Open(dsn.driver, dsn.name)
		if err != nil {
			t.Fatal(err)
		}
		var compressed, packed int
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM source_bodies WHERE encoding = 'zstd'`).Scan(&compressed)
		if err == nil {
			err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM events WHERE encoding = 'z1' AND item_id = ''`).Scan(&packed)
		}
		db.Close()
		if err != nil || compressed == 0 || packed == 0 {
			t.Fatalf("%s: %d bodies stored compressed, %d item events packed, %v; want the filled source's", dsn.driver, compressed, packed, err)
		}
	}

	// The seen entry ids came along: of a..f only f is new.
	news, _ := dst.Node(ctx, "news")
	srcState, _ := dst.Source(ctx, news.SourceID)
	applied, err := dst.ApplyFetch(ctx, hub.FetchOutcome{SourceID: news.SourceID, State: srcState.SourceState, Changed: true,
		Entries: []hub.Entry{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}, {ID: "e"}, {ID: "f"}}})
	if err != nil || len(applied.New) != 1 || applied.New[0].ID != "f" {
		t.Fatalf("fetch after the copy: new %+v, %v; want only f", applied.New, err)
	}

	// New rows continue where the source stopped.
	nodes, _ := src.Nodes(ctx)
	var maxNode int64
	for _, n := range nodes {
		maxNode = max(maxNode, n.ID)
	}
	fresh := &hub.Node{Name: "after-copy", NodeConfig: hub.DefaultNodeConfig()}
	if err := dst.CreateNode(ctx, fresh); err != nil {
		t.Fatalf("create a node after the copy: %v", err)
	}
	if fresh.ID <= maxNode {
		t.Fatalf("new node id %d, the copy has ids up to %d: sequences were not reset", fresh.ID, maxNode)
	}
	news, _ = dst.Node(ctx, "news")
	got, err := dst.Append(ctx, news.ID, []hub.Event{{Kind: hub.EventItem, ItemID: "later"}})
	if err != nil || got[0].Seq != news.LastSeq+1 {
		t.Fatalf("append after the copy: %+v, %v (last seq %d)", got, err, news.LastSeq)
	}
	if _, err := dst.PutSubscription(ctx, &hub.Subscription{NodeID: news.ID, Kind: hub.KindWebhook,
		Address: "http://127.0.0.1/after", State: hub.SubActive}); err != nil {
		t.Fatalf("subscribe after the copy: %v", err)
	}
	if err := dst.RecordPing(ctx, &hub.Ping{Dialect: "rest", URL: "https://example.org/x"}); err != nil {
		t.Fatalf("record a ping after the copy: %v", err)
	}
	if _, _, err := dst.EnsureSource(ctx, "https://example.org/after"); err != nil {
		t.Fatalf("add a source after the copy: %v", err)
	}

	// A target that holds something is refused, and left alone.
	_, err = store.Copy(ctx, path, target, store.CopyOptions{Options: store.Options{Logger: quietLogger()}})
	if !errors.Is(err, store.ErrTargetNotEmpty) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("copy into a used target: %v, want ErrTargetNotEmpty mentioning --force", err)
	}
	if _, err := dst.Node(ctx, "after-copy"); err != nil {
		t.Fatalf("the refused copy changed the target: %v", err)
	}
	// --force replaces it with the source.
	report, err = store.Copy(ctx, path, target, store.CopyOptions{Force: true, Options: store.Options{Logger: quietLogger()}})
	if err != nil || !report.Replaced {
		t.Fatalf("forced copy: %+v, %v", report, err)
	}
	if a, b := dumpStore(t, ctx, src), dumpStore(t, ctx, dst); a != b {
		t.Fatalf("after a forced copy the target differs\nsource: %s\ncopy:   %s", a, b)
	}
}

func TestCopyRefusals(t *testing.T) {
	ctx := context.Background()
	opts := store.CopyOptions{Options: store.Options{Logger: quietLogger()}}
	dir := t.TempDir()
	for _, tc := range []struct{ from, to, want string }{
		{"postgres://127.0.0.1/x", "postgres://127.0.0.1/y", "copying is from an SQLite file"},
		{filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db"), "copying is to PostgreSQL"},
		{filepath.Join(dir, "missing.db"), "postgres://127.0.0.1:1/y", "no such file"},
		{dir, "postgres://127.0.0.1:1/y", "is a directory"},
		{"", "postgres://127.0.0.1:1/y", "source: open database: empty"},
	} {
		_, err := store.Copy(ctx, tc.from, tc.to, opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Copy(%q, %q) = %v, want an error with %q", tc.from, tc.to, err, tc.want)
		}
	}

	// A source this pingd cannot read as its own.
	target := testenv.PostgresURL(t)
	notPingd := filepath.Join(dir, "other.db")
	if err := os.WriteFile(notPingd, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Copy(ctx, notPingd, target, opts); err == nil || !strings.Contains(err.Error(), "not a pingd database") {
		t.Fatalf("copy of an empty file: %v", err)
	}
}

// fillEveryTable writes at least one row into every table.
func fillEveryTable(t *testing.T, ctx context.Context, s store.Store) {
	t.Helper()
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Date(2031, 5, 6, 7, 8, 9, 123456000, time.UTC)
	src, _, err := s.EnsureSource(ctx, "https://example.org/feed.xml")
	check(err)
	news := &hub.Node{Name: "news", NodeConfig: hub.NodeConfig{Title: "News ✓", AccessModel: hub.AccessWhitelist,
		MaxItems: 3, DeliverPayloads: true, NotificationType: hub.NotifyNormal},
		SourceID: src.ID, TokenHash: []byte{0, 1, 0xfe, 0xff}}
	check(s.CreateNode(ctx, news))
	plain := &hub.Node{Name: "feeds/plain", NodeConfig: hub.DefaultNodeConfig(), Implicit: true}
	check(s.CreateNode(ctx, plain))

	// The baseline fetch fills seen; the next one publishes.
	// A body that compresses, so the copy carries it compressed.
	body := "<rss>\x00\xff" + strings.Repeat("<item><title>An entry</title></item>", 50) + "</rss>"
	state := hub.SourceState{URL: src.URL, ETag: `"v1"`, Body: []byte(body), IsFeed: true,
		Title: "Feed", SiteURL: "https://example.org/", Baselined: true, LastFetchAt: t0, LastStatus: 200,
		Hints:       hub.PollHints{TTL: time.Hour, SkipHours: []int{1, 2}, UpdateBase: t0},
		NextFetchAt: t0.Add(time.Hour), NextFetchReason: "ttl"}
	entries := func(ids ...string) []hub.Entry {
		var out []hub.Entry
		for _, id := range ids {
			out = append(out, hub.Entry{ID: id, Payload: []byte(`<entry xmlns="http://www.w3.org/2005/Atom"><id>` + id + `</id></entry>`),
				Title: "Title " + id, Link: "https://example.org/" + id, Updated: t0})
		}
		return out
	}
	_, err = s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: state, Changed: true, Entries: entries("a", "b")})
	check(err)
	state.ETag = `"v2"`
	_, err = s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: state, Changed: true, Entries: entries("a", "b", "c", "d", "e")})
	check(err)
	check(s.MarkSourceDue(ctx, src.ID, t0, &hub.ChangeNote{Title: "note", Description: "pending"}))

	_, err = s.Append(ctx, plain.ID, []hub.Event{
		{Kind: hub.EventItem, ItemID: "p1", Payload: []byte("<entry/>"), Publisher: "owner@example.org", Updated: t0},
		{Kind: hub.EventItem, ItemID: "p2", Summary: "two"},
		{Kind: hub.EventRetract, ItemID: "p1"},
		{Kind: hub.EventChange, Title: "changed"},
		{Kind: hub.EventRevoke, Address: "gone@example.org"},
	})
	check(err)

	sub := &hub.Subscription{NodeID: news.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1:9/hook",
		State: hub.SubActive, ExpiresAt: t0.Add(24 * time.Hour),
		Options: hub.Options{Method: "POST", Diff: "none", Secret: "s3cret", Verify: map[string]string{"token": "x"}}}
	_, err = s.PutSubscription(ctx, sub)
	check(err)
	check(s.SaveDeliveryState(ctx, sub.ID, hub.DeliveryState{Cursor: 1, Attempts: 2, ConsecutiveErrors: 1,
		FirstFailureAt: t0, NextAttemptAt: t0.Add(time.Minute), LastError: "HTTP 500", LastStatus: 500}))
	// A request about it waits for verification as its pending change.
	_, err = s.RequestSubscription(ctx, &hub.Subscription{NodeID: news.ID, Kind: hub.KindWebhook,
		Address: "http://127.0.0.1:9/hook", Options: hub.Options{Method: "NOTIFY", Secret: "other"}})
	check(err)
	reader := &hub.Subscription{NodeID: plain.ID, Kind: hub.KindXMPP, Address: "reader@example.org/home",
		BareJID: "reader@example.org", SubID: "sub-1", State: hub.SubActive}
	_, err = s.PutSubscription(ctx, reader)
	check(err)
	// Its digests and bounces (xmpp_subscription_state) go along.
	check(s.SetDigest(ctx, reader.ID, hub.Options{Digest: true}, 1, t0.Add(time.Hour)))
	_, _, err = s.RecordBounce(ctx, reader.ID, "recipient-unavailable", t0)
	check(err)
	// A lease taken by a running instance goes along too.
	_, err = s.PutSubscription(ctx, &hub.Subscription{NodeID: plain.ID, Kind: hub.KindCNWS, Address: "http://127.0.0.1:9/cnws",
		State: hub.SubPending})
	check(err)
	_, err = s.ClaimDeliveries(ctx, time.Now(), plain.ID, 10, "instance-1", time.Now().Add(time.Hour))
	check(err)
	check(s.SetXMPPSeq(ctx, plain.ID, 2))
	// A deleted node's XMPP subscribers wait for their notifications.
	gone := &hub.Node{Name: "gone", NodeConfig: hub.DefaultNodeConfig()}
	check(s.CreateNode(ctx, gone))
	_, err = s.PutSubscription(ctx, &hub.Subscription{NodeID: gone.ID, Kind: hub.KindXMPP, Address: "reader@example.org/home",
		BareJID: "reader@example.org", State: hub.SubActive, Options: hub.Options{Format: hub.FormatMessage}})
	check(err)
	check(s.DeleteNode(ctx, "gone"))

	check(s.SetAffiliation(ctx, news.ID, "member@example.org", hub.AffMember))
	check(s.SetAffiliation(ctx, news.ID, "owner@example.org", hub.AffOwner))
	check(s.(hub.UpstreamStore).PutUpstream(ctx, &hub.Upstream{SourceID: src.ID, Kind: hub.UpstreamWebSub,
		Endpoint: "https://hub.example.org/", Topic: src.URL, Secret: "s", State: hub.UpstreamActive,
		LeaseSeconds: 86400, ExpiresAt: t0.Add(24 * time.Hour), NextRenewAt: t0.Add(19 * time.Hour)}))
	_, err = s.(hub.RelayStore).EnqueueRelay(ctx, &hub.Relay{Target: "xmlrpc:https://rpc.example.org/RPC2", Name: "Blog",
		URL: "https://example.org/", FeedURL: "https://example.org/feed.xml", Tags: []string{"a", "b"}, CreatedAt: t0}, time.Minute)
	check(err)
	for i := range 3 {
		check(s.RecordPing(ctx, &hub.Ping{Dialect: "xmlrpc-weblogupdates", Name: fmt.Sprintf("blog %d", i),
			URL: "https://example.org/", Remote: "127.0.0.1", ReceivedAt: t0.Add(time.Duration(i) * time.Second)}))
	}
}

// dumpStore renders everything readable through the Store as JSON.
func dumpStore(t *testing.T, ctx context.Context, s store.Store) string {
	t.Helper()
	type nodeDump struct {
		Node   hub.Node
		Events []hub.Event
		Items  []hub.Event
		Subs   []hub.Subscription
		Affs   map[string]hub.Affiliation
	}
	var dump struct {
		Nodes      []nodeDump
		Sources    []hub.Source
		Pings      []hub.Ping
		PingsTotal int64
		Behind     []hub.Node
		Upstreams  []hub.Upstream
		Relays     []hub.RelayTargetStatus
		Deletions  []hub.NodeDeletion
	}
	nodes, err := s.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		d := nodeDump{Node: n}
		if d.Events, err = s.EventsAfter(ctx, n.ID, 0, 0); err != nil {
			t.Fatal(err)
		}
		if d.Items, err = s.Items(ctx, n.ID, nil, 0); err != nil {
			t.Fatal(err)
		}
		if d.Subs, err = s.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID}); err != nil {
			t.Fatal(err)
		}
		if d.Affs, err = s.Affiliations(ctx, n.ID); err != nil {
			t.Fatal(err)
		}
		dump.Nodes = append(dump.Nodes, d)
	}
	if dump.Sources, err = s.Sources(ctx); err != nil {
		t.Fatal(err)
	}
	// Lists leave the bodies out; Source reads each (source_bodies).
	for i := range dump.Sources {
		one, err := s.Source(ctx, dump.Sources[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(one.Body) == 0 {
			t.Fatalf("source %s has no body; the test must fill source_bodies", one.URL)
		}
		dump.Sources[i].Body = one.Body
	}
	if dump.Pings, dump.PingsTotal, err = s.Pings(ctx, time.Time{}, 0); err != nil {
		t.Fatal(err)
	}
	if dump.Behind, err = s.NodesBehindXMPP(ctx); err != nil {
		t.Fatal(err)
	}
	if dump.Upstreams, err = s.(hub.UpstreamStore).Upstreams(ctx); err != nil {
		t.Fatal(err)
	}
	if dump.Relays, err = s.(hub.RelayStore).RelayStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if dump.Deletions, err = s.NodeDeletions(ctx, 100); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(dump)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
