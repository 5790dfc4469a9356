package store

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
)

// TestMigrateCanonicalizesStoredURLs: rows written before URLs were stored
// in canonical form get it, and sources and subscriptions that were one URL
// spelled several ways become one, keeping the nodes, seen entries and
// upstream subscriptions of each.
func TestMigrateCanonicalizesStoredURLs(t *testing.T) {
	for _, bc := range backendCases() {
		t.Run(bc.name, func(t *testing.T) {
			ctx := context.Background()
			s, _ := bc.connect(t)
			// The schema just before the migration. Its rows are written in
			// SQL: the Store's methods speak the newest schema, whose later
			// columns do not exist yet.
			before := versionNamed(t, bc.name, "canonical_urls") - 1
			if err := s.migrate(ctx, before); err != nil {
				t.Fatal(err)
			}
			now := s.dialect.timeArg(time.Now())
			insert := func(query string, args ...any) int64 {
				t.Helper()
				var id int64
				if err := s.write.QueryRowContext(ctx, query+` RETURNING id`, args...).Scan(&id); err != nil {
					t.Fatalf("%s: %v", query, err)
				}
				return id
			}
			// Three spellings of one feed, in three sources, each with a node
			// and seen entries; one already canonical, not the oldest.
			spellings := []string{"HTTP://Example.org:0080/feed?", "http://example.org./feed", "http://example.org/feed"}
			var ids, nodeIDs []int64
			for i, u := range spellings {
				id := insert(`INSERT INTO sources (original_url, url, site_url, baselined, created_at) VALUES ($1, $1, 'HTTP://Example.org:80', TRUE, $2)`, u, now)
				ids = append(ids, id)
				for _, entry := range []string{"shared", "only-" + string(rune('a'+i))} {
					if _, err := s.write.ExecContext(ctx, `INSERT INTO seen (source_id, entry_id, seen_at) VALUES ($1, $2, $3)`, id, entry, now); err != nil {
						t.Fatal(err)
					}
				}
				nodeIDs = append(nodeIDs, insert(`INSERT INTO nodes (name, access_model, max_items, deliver_payloads, notification_type, source_id, created_at, updated_at)
					VALUES ($1, 'open', 10, TRUE, 'headline', $2, $3, $3)`, "n"+string(rune('a'+i)), id, now))
			}
			insert(`INSERT INTO upstreams (source_id, kind, endpoint, topic, state, created_at, updated_at)
				VALUES ($1, 'websub', 'https://hub.example/', $2, 'active', $3, $3)`, ids[1], spellings[1], now)
			other := insert(`INSERT INTO sources (original_url, url, created_at) VALUES ('http://other.example/x/../feed', 'http://other.example/x/../feed', $1)`, now)
			// Two spellings of one webhook callback, and one rssCloud
			// subscription whose callback and topic are not canonical.
			for _, sub := range []struct{ kind, address, bareJID string }{
				{"webhook", "http://CB.example:080/hook", ""},
				{"webhook", "http://cb.example/hook", ""},
				{"rsscloud", "http://cb.example:80/rpc#http%3A%2F%2FExample.org%2F.%2Ffeed", ""},
				{"xmpp", "Reader@Example.org", "Reader@Example.org"},
			} {
				insert(`INSERT INTO subscriptions (node_id, kind, address, bare_jid, state, options, created_at, updated_at)
					VALUES ($1, $2, $3, $4, 'active', '{}', $5, $5)`, nodeIDs[0], sub.kind, sub.address, sub.bareJID, now)
			}

			if err := s.migrate(ctx, 0); err != nil {
				t.Fatal(err)
			}

			srcs, err := s.SourcesMatching(ctx, "http://example.org/feed")
			if err != nil || len(srcs) != 1 || srcs[0].ID != ids[0] {
				t.Fatalf("sources of the canonical URL = %+v, %v; want the oldest, %d, alone", srcs, err, ids[0])
			}
			src := srcs[0]
			if src.OriginalURL != "http://example.org/feed" || src.URL != "http://example.org/feed" || src.SiteURL != "http://example.org/" {
				t.Fatalf("merged source URLs: original %q, current %q, site %q", src.OriginalURL, src.URL, src.SiteURL)
			}
			for _, id := range ids[1:] {
				if _, err := s.Source(ctx, id); err == nil {
					t.Errorf("duplicate source %d still there", id)
				}
			}
			nodes, err := s.NodesBySource(ctx, src.ID)
			if err != nil || len(nodes) != 3 {
				t.Fatalf("nodes of the merged source = %d, %v; want all 3", len(nodes), err)
			}
			ups, err := s.UpstreamsOfSource(ctx, src.ID)
			if err != nil || len(ups) != 1 {
				t.Fatalf("upstreams of the merged source = %+v, %v", ups, err)
			}
			// Every entry seen under any spelling stays seen.
			applied, err := s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: src.SourceState, Changed: true,
				Entries: []hub.Entry{{ID: "shared"}, {ID: "only-a"}, {ID: "only-b"}, {ID: "only-c"}, {ID: "fresh"}}})
			if err != nil || len(applied.New) != 1 || applied.New[0].ID != "fresh" {
				t.Fatalf("after the merge, new = %+v, %v; want only fresh", applied.New, err)
			}
			if o, err := s.Source(ctx, other); err != nil || o.OriginalURL != "http://other.example/feed" {
				t.Fatalf("other source = %+v, %v", o, err)
			}

			subs, err := s.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: nodeIDs[0]})
			if err != nil {
				t.Fatal(err)
			}
			var addrs []string
			for _, sub := range subs {
				addrs = append(addrs, string(sub.Kind)+" "+sub.Address)
			}
			slices.Sort(addrs)
			want := []string{
				"rsscloud http://cb.example/rpc#http%3A%2F%2Fexample.org%2Ffeed",
				"webhook http://cb.example/hook",
				"xmpp Reader@Example.org",
			}
			if !slices.Equal(addrs, want) {
				t.Fatalf("subscriptions after migrating:\n got %q\nwant %q", addrs, want)
			}
		})
	}
}

// versionNamed is the version of the backend's migration called name
// (its file name without the number).
func versionNamed(t *testing.T, backend, name string) int {
	t.Helper()
	ms, err := migrationsFor(backend)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if strings.TrimSuffix(m.name[strings.IndexByte(m.name, '_')+1:], ".sql") == name {
			return m.version
		}
	}
	t.Fatalf("no %s migration %q", backend, name)
	return 0
}
