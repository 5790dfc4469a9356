package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// latestVersion is the newest schema version this binary knows.
func latestVersion(backend string) int {
	ms, err := migrationsFor(backend)
	if err != nil {
		return 0
	}
	return len(ms)
}

func quietOptions() Options {
	o := Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	o.setDefaults()
	return o
}

// backendCase connects to a fresh, empty database of one backend without
// migrating it, and gives the DSN that Open takes for it.
type backendCase struct {
	name    string
	connect func(t *testing.T) (*sqlStore, string)
}

// migrated is a fresh database of the backend at the latest version.
func (bc backendCase) migrated(t *testing.T) *sqlStore {
	t.Helper()
	s, _ := bc.connect(t)
	if err := s.migrate(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	return s
}

func backendCases() []backendCase {
	return []backendCase{
		{backendSQLite, func(t *testing.T) (*sqlStore, string) {
			path := filepath.Join(t.TempDir(), "pingd.db")
			s, err := connectSQLite(context.Background(), path, nil, quietOptions())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s, path
		}},
		{backendPostgres, func(t *testing.T) (*sqlStore, string) {
			dsn := testenv.PostgresURL(t)
			s, err := connectPostgres(context.Background(), dsn, quietOptions())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s, dsn
		}},
	}
}

func TestMigrationsAreNumbered(t *testing.T) {
	for _, backend := range []string{backendSQLite, backendPostgres} {
		ms, err := migrationsFor(backend)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			t.Fatalf("%s has no migrations", backend)
		}
	}
	// Both backends move in step, so one version means one schema.
	if a, b := latestVersion(backendSQLite), latestVersion(backendPostgres); a != b {
		t.Fatalf("sqlite has %d migrations, postgres %d", a, b)
	}
}

func TestMigrateEmptyDatabase(t *testing.T) {
	for _, bc := range backendCases() {
		t.Run(bc.name, func(t *testing.T) {
			ctx := context.Background()
			raw, dsn := bc.connect(t)
			raw.Close()
			s, err := Open(ctx, dsn, quietOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			st := s.(*sqlStore)
			var versions []int64
			versions, err = st.queryInts(ctx, st.read, `SELECT version FROM schema_migrations ORDER BY version`)
			if err != nil {
				t.Fatal(err)
			}
			if len(versions) != latestVersion(bc.name) || versions[len(versions)-1] != int64(latestVersion(bc.name)) {
				t.Fatalf("recorded versions %v, want 1..%d", versions, latestVersion(bc.name))
			}
			var applied time.Time
			if err := st.queryRow(ctx, st.read, `SELECT applied_at FROM schema_migrations WHERE version = 1`, nil, tc(&applied)); err != nil {
				t.Fatal(err)
			}
			if time.Since(applied) > time.Hour || applied.After(time.Now().Add(time.Minute)) {
				t.Fatalf("applied_at = %v", applied)
			}
			// Opening again applies nothing and keeps the data.
			n := &hub.Node{Name: "kept", NodeConfig: hub.DefaultNodeConfig()}
			if err := s.CreateNode(ctx, n); err != nil {
				t.Fatal(err)
			}
			s.Close()
			again, err := Open(ctx, dsn, quietOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close()
			if _, err := again.Node(ctx, "kept"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestMigrateKeepsData applies migrations 1..k to an empty database,
// writes data the way a pingd of version k would (raw SQL from
// testdata/seed), migrates to the newest version and reads the data back
// through the Store. For k = newest it checks the seed and the reading.
func TestMigrateKeepsData(t *testing.T) {
	for _, bc := range backendCases() {
		for k := 1; k <= latestVersion(bc.name); k++ {
			t.Run(fmt.Sprintf("%s/from%d", bc.name, k), func(t *testing.T) {
				ctx := context.Background()
				s, _ := bc.connect(t)
				if err := s.migrate(ctx, k); err != nil {
					t.Fatal(err)
				}
				seed, err := os.ReadFile(filepath.Join("testdata", "seed", bc.name, fmt.Sprintf("%04d.sql", k)))
				if err != nil {
					t.Fatalf("no seed data for version %d: %v", k, err)
				}
				if _, err := s.write.ExecContext(ctx, string(seed)); err != nil {
					t.Fatalf("seed version %d: %v", k, err)
				}
				if err := s.migrate(ctx, 0); err != nil {
					t.Fatal(err)
				}
				checkSeeded(t, s)
				checkSeededChanges(t, s, k)
				checkSeededPings(t, s, k)
				checkSeededCallbackHosts(t, s)
				checkSeededRevokes(t, s, k)
				checkSeededUnused(t, s, k)
				checkSeededBodies(t, s)
				checkSeededDeletions(t, s, k)
				checkSeededXMPPState(t, s, k)
				checkSeededPackedEvents(t, s, k)
				checkLeasedSourcesIndex(t, s)
				if bc.name == backendSQLite {
					checkForeignKeysAfterMigration(t, s)
				}
			})
		}
	}
}

// checkForeignKeysAfterMigration: migrations that rebuild a table with
// foreign keys off (0008) leave them on again, and the other tables'
// references name the rebuilt table: deleting the seeded node deletes
// its subscriptions, events and affiliations with it.
func checkForeignKeysAfterMigration(t *testing.T, s *sqlStore) {
	t.Helper()
	ctx := context.Background()
	var on int
	if err := s.write.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&on); err != nil || on != 1 {
		t.Fatalf("foreign_keys after migrating = %d, %v; want 1", on, err)
	}
	var parents []string
	for _, table := range []string{"events", "items", "subscriptions", "affiliations"} {
		var parent string
		if err := s.write.QueryRowContext(ctx, `SELECT "table" FROM pragma_foreign_key_list($1) WHERE "from" = 'node_id'`, table).Scan(&parent); err != nil {
			t.Fatalf("foreign key of %s: %v", table, err)
		}
		parents = append(parents, parent)
	}
	if want := []string{"nodes", "nodes", "nodes", "nodes"}; !slices.Equal(parents, want) {
		t.Fatalf("node_id references %v, want %v", parents, want)
	}
	if err := s.DeleteNode(ctx, "seeded"); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"events", "items", "subscriptions", "affiliations"} {
		var left int
		if err := s.write.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table+` WHERE node_id NOT IN (SELECT id FROM nodes)`).Scan(&left); err != nil || left != 0 {
			t.Errorf("%s: %d rows of deleted nodes left, %v", table, left, err)
		}
	}
	var left int
	if err := s.write.QueryRowContext(ctx, `SELECT COUNT(*) FROM xmpp_subscription_state
		WHERE subscription_id NOT IN (SELECT id FROM subscriptions)`).Scan(&left); err != nil || left != 0 {
		t.Errorf("xmpp_subscription_state: %d rows of deleted subscriptions left, %v", left, err)
	}
}

// checkSeededChanges reads the requests about verified subscriptions that
// seeds from version 8 on hold: an unsubscription waiting for verification
// (state unsubscribing before version 10) is a pending change of the active
// subscription, and a pending change keeps its settings.
func checkSeededChanges(t *testing.T, s Store, version int) {
	t.Helper()
	if version < 8 {
		return
	}
	ctx := context.Background()
	leaving, err := s.Subscriptions(ctx, hub.SubscriptionFilter{Address: "http://127.0.0.1/leaving"})
	if err != nil || len(leaving) != 1 {
		t.Fatalf("unsubscribing subscription = %+v, %v", leaving, err)
	}
	if l := leaving[0]; l.State != hub.SubActive || l.Change.Mode != hub.ChangeUnsubscribe || l.Change.ID == "" ||
		l.Options.Secret != "mine" || l.Cursor != 2 || l.Change.RequestedAt.IsZero() {
		t.Fatalf("unsubscribing subscription after migrating = %+v", l)
	}
	if version < 10 {
		return
	}
	renewing, err := s.Subscriptions(ctx, hub.SubscriptionFilter{Address: "http://127.0.0.1/renewing"})
	if err != nil || len(renewing) != 1 {
		t.Fatalf("subscription with a pending change = %+v, %v", renewing, err)
	}
	if r := renewing[0]; r.State != hub.SubSuspended || r.Options.Protocol != "xml-rpc" || r.Change.ID != "c2" ||
		r.Change.Mode != hub.ChangeSubscribe || r.Change.Options.Protocol != "http-post" {
		t.Fatalf("subscription with a pending change = %+v", r)
	}
}

// checkSeededPings reads the extendedPing that seeds from version 3 on
// hold: written before version 13, it named its feed as its url, and is
// read with that URL as its feed too; from version 13 on, the weblog's
// url and its feed are kept apart.
func checkSeededPings(t *testing.T, s Store, version int) {
	t.Helper()
	if version < 3 {
		return
	}
	pings, _, err := s.Pings(context.Background(), time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(pings, func(p hub.Ping) bool { return p.Name == "Tagged" })
	if i < 0 {
		t.Fatalf("the seeded extendedPing is gone: %+v", pings)
	}
	wantURL, wantFeed := "https://example.org/tagged", "https://example.org/tagged"
	if version >= 13 {
		wantURL = "https://example.org/"
	}
	if p := pings[i]; p.URL != wantURL || p.FeedURL != wantFeed || !slices.Equal(p.Tags, []string{"go", "xmpp"}) {
		t.Fatalf("seeded extendedPing after migrating = %+v, want url %s and feed %s", p, wantURL, wantFeed)
	}
	for _, p := range pings {
		if p.Dialect != "xmlrpc-extended" && p.FeedURL != "" {
			t.Fatalf("a %s ping has a feed URL after migrating: %+v", p.Dialect, p)
		}
	}
}

// checkSeededUnused: from version 15 on, seeds hold an implicit node
// without subscriptions and a source without nodes, both marked unused
// since 2031-05-06T07:00Z; a day and more later they are deleted, and
// nothing else is. Older data has no marks: the first pass marks.
func checkSeededUnused(t *testing.T, s Store, version int) {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2031, 5, 7, 8, 0, 0, 0, time.UTC)
	nodes, sources, err := s.DeleteUnused(ctx, at, at.Add(-24*time.Hour), at.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := int64(0)
	if version >= 15 {
		want = 1
	}
	if nodes != want || sources != want {
		t.Fatalf("DeleteUnused after migrating from %d = %d nodes, %d sources; want %d, %d", version, nodes, sources, want, want)
	}
	if _, err := s.Node(ctx, "seeded"); err != nil {
		t.Fatalf("the owner's node: %v", err)
	}
}

// checkSeededRevokes: from version 16 on, seeds hold a revoke stored
// before its message type had a column, read as an XEP-0060 one (no
// PlainType); from version 17 on, also a revoke of a reader of chat
// messages, read back with its type and no publisher.
func checkSeededRevokes(t *testing.T, s Store, version int) {
	t.Helper()
	if version < 16 {
		return
	}
	ctx := context.Background()
	n, err := s.Node(ctx, "revoked")
	if err != nil {
		t.Fatal(err)
	}
	events, err := s.EventsAfter(ctx, n.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []hub.Event{{Kind: hub.EventRevoke, Address: "old@example.org/phone"}}
	if version >= 17 {
		want = append(want, hub.Event{Kind: hub.EventRevoke, Address: "reader@example.org", PlainType: hub.NotifyChat})
	}
	if len(events) != len(want) {
		t.Fatalf("revokes after migrating from %d = %+v, want %d", version, events, len(want))
	}
	for i, e := range events {
		if e.Kind != want[i].Kind || e.Address != want[i].Address || e.PlainType != want[i].PlainType || e.Publisher != "" {
			t.Errorf("revoke %d after migrating from %d = %+v, want %+v", i+1, version, e, want[i])
		}
	}
}

// checkSeededCallbackHosts: after migrating, every subscription is counted
// under its callback's host, those stored before version 16 included.
func checkSeededCallbackHosts(t *testing.T, s Store) {
	t.Helper()
	ctx := context.Background()
	subs, err := s.Subscriptions(ctx, hub.SubscriptionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, sub := range subs {
		if h := hub.CallbackHost(sub.Kind, sub.Address); h != "" {
			want[h]++
		}
	}
	if want["127.0.0.1"] == 0 {
		t.Fatalf("no seeded subscription with a callback on 127.0.0.1: %+v", subs)
	}
	for host, n := range want {
		if got, err := s.CountCallbackHostSubscriptions(ctx, host); err != nil || got != n {
			t.Errorf("CountCallbackHostSubscriptions(%s) = %d, %v; want %d", host, got, err, n)
		}
	}
}

// checkSeededBodies: the seeded feed's body (in the sources row before
// version 18) is the one row of source_bodies, sources without a body
// have none, and the sources table has no body column left. (Seeded
// before version 22 as fetched, from 22 on compressed: checkSeeded reads
// it through Source first, before its fetch stores it again.)
func checkSeededBodies(t *testing.T, s *sqlStore) {
	t.Helper()
	ctx := context.Background()
	var url, encoding string
	var stored []byte
	var rows int
	err := s.read.QueryRowContext(ctx, `SELECT s.original_url, b.body, b.encoding, (SELECT COUNT(*) FROM source_bodies)
		FROM source_bodies b JOIN sources s ON s.id = b.source_id`).Scan(&url, &stored, &encoding, &rows)
	if err != nil || url != "https://example.org/feed" || rows != 1 {
		t.Fatalf("source_bodies: %s, %d rows, %v; want the seeded feed's alone", url, rows, err)
	}
	if body, err := decodeBody(encoding, stored); err != nil || string(body) != "<rss/>" {
		t.Fatalf("seeded body %q (%q), %v; want <rss/>", body, encoding, err)
	}
	if _, err := s.read.ExecContext(ctx, `SELECT body FROM sources`); err == nil {
		t.Fatal("sources still has a body column")
	}
}

// checkSeededDeletions: a node deletion recorded by version 20 is read
// back with its subscribers.
func checkSeededDeletions(t *testing.T, s *sqlStore, k int) {
	t.Helper()
	dels, err := s.NodeDeletions(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if k < 20 {
		if len(dels) != 0 {
			t.Fatalf("deletions before version 20: %+v", dels)
		}
		return
	}
	if len(dels) != 1 || dels[0].Node.Name != "deleted-node" || len(dels[0].Subscribers) != 1 ||
		dels[0].Subscribers[0].Address != "reader@example.org/home" || dels[0].Subscribers[0].Options.Format != hub.FormatMessage ||
		!dels[0].DeletedAt.Equal(time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)) {
		t.Fatalf("seeded deletion: %+v", dels)
	}
}

// checkSeededXMPPState: from version 20 on, seeds hold an XMPP
// subscription with digests and one whose notifications bounce, their
// state in the delivery columns of subscriptions before version 21 and in
// xmpp_subscription_state from then on; after migrating, both are read
// back as they were, the digest is due, the bounces are on the status
// page, and no XMPP row of subscriptions has a delivery column set.
func checkSeededXMPPState(t *testing.T, s *sqlStore, k int) {
	t.Helper()
	if k < 20 {
		return
	}
	ctx := context.Background()
	at := func(h int) time.Time { return time.Date(2031, 5, 6, h, 0, 0, 0, time.UTC) }
	due, err := s.DueDigests(ctx, at(9), 10)
	if err != nil || len(due) != 1 {
		t.Fatalf("due digests after migrating from %d = %+v, %v; want the seeded one", k, due, err)
	}
	if d := due[0]; d.Address != "digest@example.org/home" || d.Cursor != 1 || !d.NextAttemptAt.Equal(at(9)) ||
		!d.LastDeliveredAt.Equal(at(8)) || !d.Options.Digest || d.ConsecutiveErrors != 0 {
		t.Fatalf("digest subscription after migrating from %d = %+v", k, d)
	}
	if early, err := s.DueDigests(ctx, at(8), 10); err != nil || len(early) != 0 {
		t.Fatalf("digests due before their time = %+v, %v", early, err)
	}
	away, err := s.Subscriptions(ctx, hub.SubscriptionFilter{Kind: hub.KindXMPP, Address: "away@example.org/phone"})
	if err != nil || len(away) != 1 {
		t.Fatalf("bouncing subscription = %+v, %v", away, err)
	}
	if b := away[0]; b.ConsecutiveErrors != 2 || !b.FirstFailureAt.Equal(at(6)) || b.LastError != "recipient-unavailable: away" ||
		b.Cursor != 2 || !b.NextAttemptAt.IsZero() {
		t.Fatalf("bouncing subscription after migrating from %d = %+v", k, b)
	}
	rep, err := s.StatusReport(ctx, StatusQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.BouncingTotal != 1 || len(rep.Bouncing) != 1 || rep.Bouncing[0].Address != "away@example.org/phone" || rep.Bouncing[0].Bounces != 2 {
		t.Fatalf("bouncing on the status report after migrating from %d: %d, %+v", k, rep.BouncingTotal, rep.Bouncing)
	}
	if rep.Queue.Failing != 0 {
		t.Fatalf("HTTP deliveries failing after migrating from %d: %+v", k, rep.Queue)
	}
	var set int
	if err := s.queryRow(ctx, s.read, `SELECT COUNT(*) FROM subscriptions WHERE kind = 'xmpp' AND (cursor_seq <> 0
		OR consecutive_errors <> 0 OR first_failure_at IS NOT NULL OR next_attempt_at IS NOT NULL OR last_error <> ''
		OR last_delivered_at IS NOT NULL)`, nil, &set); err != nil || set != 0 {
		t.Fatalf("XMPP subscriptions with delivery columns set after migrating from %d: %d, %v", k, set, err)
	}
}

// checkSeededPackedEvents: from version 23 on, seeds hold an item event
// stored packed; it reads back whole, as an item and in the log.
func checkSeededPackedEvents(t *testing.T, s *sqlStore, k int) {
	t.Helper()
	if k < 23 {
		return
	}
	ctx := context.Background()
	n, err := s.Node(ctx, "packed")
	if err != nil {
		t.Fatal(err)
	}
	want := seededPackedEvent()
	want.NodeID, want.Seq, want.Created = n.ID, 1, time.Date(2031, 5, 6, 7, 45, 0, 0, time.UTC)
	items, err := s.Items(ctx, n.ID, nil, 0)
	if err != nil || len(items) != 1 || !reflect.DeepEqual(items[0], want) {
		t.Fatalf("packed item after migrating from %d = %+v, %v; want %+v", k, items, err, want)
	}
	log, err := s.EventsAfter(ctx, n.ID, 0, 0)
	if err != nil || len(log) != 1 || !reflect.DeepEqual(log[0], want) {
		t.Fatalf("packed event after migrating from %d = %+v, %v; want %+v", k, log, err, want)
	}
}

// checkLeasedSourcesIndex: from version 24 on, the sources under a lease
// have an index of their own (sources_leased), which a start's look for
// them reads.
func checkLeasedSourcesIndex(t *testing.T, s *sqlStore) {
	t.Helper()
	ctx := context.Background()
	query := `SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'sources_leased'`
	if s.backend == backendPostgres {
		query = `SELECT COUNT(*) FROM pg_indexes WHERE indexname = 'sources_leased'`
	}
	var n int
	if err := s.read.QueryRowContext(ctx, query).Scan(&n); err != nil || n != 1 {
		t.Fatalf("index sources_leased: %d, %v", n, err)
	}
	if _, err := s.write.ExecContext(ctx, `UPDATE sources SET lease_owner = 'gone', lease_until = $1
		WHERE original_url = 'https://example.org/feed'`, s.timeArg(time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if srcs, err := s.SourcesLeasedBy(ctx, "gone"); err != nil || len(srcs) != 1 || srcs[0].URL != "https://example.org/feed" {
		t.Fatalf("SourcesLeasedBy = %+v, %v; want the seeded feed", srcs, err)
	}
	if srcs, err := s.SourcesLeasedByOthers(ctx, "me", time.Now()); err != nil || len(srcs) != 1 {
		t.Fatalf("SourcesLeasedByOthers = %+v, %v; want the seeded feed", srcs, err)
	}
}

// checkSeeded reads the seed data through the Store.
func checkSeeded(t *testing.T, s Store) {
	t.Helper()
	ctx := context.Background()
	n, err := s.Node(ctx, "seeded")
	if err != nil {
		t.Fatal(err)
	}
	if n.Title != "Seeded" || n.AccessModel != hub.AccessWhitelist || n.MaxItems != 10 || !n.DeliverPayloads ||
		n.LastSeq != 2 || n.XMPPSeq != 1 || n.SourceURL != "https://example.org/feed" ||
		!bytes.Equal(n.TokenHash, []byte{0, 0xff}) || !n.UpdatedAt.Equal(time.Date(2031, 1, 2, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("node = %+v", n)
	}
	if n.SendLastPublished != hub.SendLastOnSub && n.SendLastPublished != hub.SendLastNever {
		t.Fatalf("send_last_published_item = %q", n.SendLastPublished)
	}
	items, err := s.Items(ctx, n.ID, nil, 0)
	if err != nil || len(items) != 1 || items[0].ItemID != "e1" || string(items[0].Payload) != "<entry/>" ||
		items[0].Link != "https://example.org/e1" {
		t.Fatalf("items = %+v, %v", items, err)
	}
	events, err := s.EventsAfter(ctx, n.ID, 0, 0)
	if err != nil || len(events) != 2 || events[1].Kind != hub.EventChange {
		t.Fatalf("events = %+v, %v", events, err)
	}
	subs, err := s.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID, Address: "http://127.0.0.1/cb"})
	if err != nil || len(subs) != 1 || subs[0].Cursor != 1 || subs[0].Options.Secret != "s3cret" ||
		subs[0].Options.Method != "POST" || subs[0].NodeName != "seeded" {
		t.Fatalf("subscriptions = %+v, %v", subs, err)
	}
	if a, err := s.Affiliation(ctx, n.ID, "member@example.org"); err != nil || a != hub.AffMember {
		t.Fatalf("affiliation = %q, %v", a, err)
	}
	src, err := s.Source(ctx, n.SourceID)
	if err != nil || src.ETag != `"v1"` || string(src.Body) != "<rss/>" || !src.IsFeed || !src.Baselined ||
		src.Hints.TTL != time.Hour || src.PendingNote == nil || src.PendingNote.Title != "pending note" ||
		!src.NextFetchAt.Equal(time.Date(2031, 5, 6, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("source = %+v, %v", src, err)
	}
	// The seen ids survived: e1 is not new, e2 is.
	out := hub.FetchOutcome{SourceID: src.ID, State: src.SourceState, Changed: true,
		Entries: []hub.Entry{{ID: "e1"}, {ID: "e2"}}}
	applied, err := s.ApplyFetch(ctx, out)
	if err != nil || len(applied.New) != 1 || applied.New[0].ID != "e2" {
		t.Fatalf("applied = %+v, %v", applied, err)
	}
	// New rows still get fresh ids and sequence numbers.
	if got, _ := s.EventsAfter(ctx, n.ID, 2, 0); len(got) != 1 || got[0].Seq != 3 {
		t.Fatalf("appended after migration: %+v", got)
	}
	fresh := &hub.Node{Name: "after-migration", NodeConfig: hub.DefaultNodeConfig()}
	if err := s.CreateNode(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutSubscription(ctx, &hub.Subscription{NodeID: fresh.ID, Kind: hub.KindWebSub, Address: "http://127.0.0.1/x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordPing(ctx, &hub.Ping{Dialect: "rest", URL: "https://example.org/2"}); err != nil {
		t.Fatal(err)
	}
	if _, total, err := s.Pings(ctx, time.Time{}, 0); err != nil || total != 2 {
		t.Fatalf("ping total = %d, %v", total, err)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	for _, bc := range backendCases() {
		t.Run(bc.name, func(t *testing.T) {
			ctx := context.Background()
			s, dsn := bc.connect(t)
			if err := s.migrate(ctx, 0); err != nil {
				t.Fatal(err)
			}
			newer := latestVersion(bc.name) + 1
			if _, err := s.exec(ctx, s.write, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`,
				newer, s.timeArg(time.Now())); err != nil {
				t.Fatal(err)
			}
			s.Close()
			_, err := Open(ctx, dsn, quietOptions())
			if !errors.Is(err, hub.ErrSchemaTooNew) {
				t.Fatalf("Open = %v, want ErrSchemaTooNew", err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("schema version %d", newer)) {
				t.Fatalf("message %q does not name the version", err)
			}
		})
	}
}

// TestMigrateLogsOneLine: migrating a fresh database logs one summary
// line at info ("database at version N"), the migrations one by one at
// debug only, and nothing at info when there is nothing to migrate.
func TestMigrateLogsOneLine(t *testing.T) {
	for _, bc := range backendCases() {
		t.Run(bc.name, func(t *testing.T) {
			s, _ := bc.connect(t)
			var buf bytes.Buffer
			s.log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
			if err := s.migrate(context.Background(), 0); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			want := fmt.Sprintf("database at version %d", latestVersion(bc.name))
			if len(lines) != 1 || !strings.Contains(lines[0], want) || !strings.Contains(lines[0], "migrated_from=0") {
				t.Fatalf("migrating a fresh database logged %d lines at info, want one with %q:\n%s", len(lines), want, buf.String())
			}
			buf.Reset()
			if err := s.migrate(context.Background(), 0); err != nil {
				t.Fatal(err)
			}
			if buf.Len() != 0 {
				t.Fatalf("a second start logged:\n%s", buf.String())
			}
		})
	}
}
