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
			// The schema just before the migration; its later columns do
			// not exist yet, so subscriptions are written in SQL below.
			before := versionNamed(t, bc.name, "canonical_urls") - 1
			if err := s.migrate(ctx, before); err != nil {
				t.Fatal(err)
			}
			// Three spellings of one feed, in three sources, each with a node
			// and seen entries; one already canonical, not the oldest.
			spellings := []string{"HTTP://Example.org:0080/feed?", "http://example.org./feed", "http://example.org/feed"}
			var ids []int64
			for i, u := range spellings {
				src, _, err := s.EnsureSource(ctx, u)
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, src.ID)
				st := src.SourceState
				st.SiteURL = "HTTP://Example.org:80"
				if _, err := s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st, Changed: true,
					Entries: []hub.Entry{{ID: "shared"}, {ID: "only-" + string(rune('a'+i))}}}); err != nil {
					t.Fatal(err)
				}
				n := &hub.Node{Name: "n" + string(rune('a'+i)), NodeConfig: hub.DefaultNodeConfig(), SourceID: src.ID}
				if err := s.CreateNode(ctx, n); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.PutUpstream(ctx, &hub.Upstream{SourceID: ids[1], Kind: hub.UpstreamWebSub, Endpoint: "https://hub.example/",
				Topic: spellings[1], State: hub.UpstreamActive}); err != nil {
				t.Fatal(err)
			}
			other, _, err := s.EnsureSource(ctx, "http://other.example/x/../feed")
			if err != nil {
				t.Fatal(err)
			}
			na, err := s.Node(ctx, "na")
			if err != nil {
				t.Fatal(err)
			}
			// Two spellings of one webhook callback, and one rssCloud
			// subscription whose callback and topic are not canonical.
			for _, sub := range []struct{ kind, address, bareJID string }{
				{"webhook", "http://CB.example:080/hook", ""},
				{"webhook", "http://cb.example/hook", ""},
				{"rsscloud", "http://cb.example:80/rpc#http%3A%2F%2FExample.org%2F.%2Ffeed", ""},
				{"xmpp", "Reader@Example.org", "Reader@Example.org"},
			} {
				if _, err := s.write.ExecContext(ctx, `INSERT INTO subscriptions (node_id, kind, address, bare_jid, state, options, created_at, updated_at)
					VALUES ($1, $2, $3, $4, 'active', '{}', $5, $5)`, na.ID, sub.kind, sub.address, sub.bareJID, s.dialect.timeArg(time.Now())); err != nil {
					t.Fatal(err)
				}
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
			if o, err := s.Source(ctx, other.ID); err != nil || o.OriginalURL != "http://other.example/feed" {
				t.Fatalf("other source = %+v, %v", o, err)
			}

			subs, err := s.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: na.ID})
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
