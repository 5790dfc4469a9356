package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
)

// A document like the polling benchmark's (bench/origins.go): an RSS
// feed of 20 entries, each with a paragraph of words from a small
// vocabulary, about 23 KB; v is its newest entry.
var sampleWords = strings.Fields(`the a feed poll change notification server client subscriber entry
	item node publish protocol update weblog ping hub cloud message stream queue fetch
	document source time day week news post article title summary link author category
	of and to in for on with by from at as is are was were be been has have had`)

func sampleFeed(i, v int) (body []byte, entries []hub.Entry) {
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0"><channel><title>Origin feed %d</title><link>http://origin.bench.example/%d/</link><description>A weblog that changes now and then.</description><language>en</language>
`, i, i)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for e := v; e > v-20 && e >= 0; e-- {
		seed := uint64(i)*1_000_003 + uint64(e)*7_919 + 1
		next := func() uint64 {
			seed ^= seed << 13
			seed ^= seed >> 7
			seed ^= seed << 17
			return seed
		}
		id := fmt.Sprintf("http://origin.bench.example/%d/posts/%d.html", i, e)
		fmt.Fprintf(&b, "<item><title>Post %d</title><link>%s</link><guid isPermaLink=\"true\">%s</guid><pubDate>%s</pubDate><description>",
			e, id, id, base.Add(time.Duration(e)*time.Minute).Format(time.RFC1123Z))
		start := b.Len()
		for b.Len()-start < 850 {
			b.WriteString(sampleWords[next()%uint64(len(sampleWords))])
			b.WriteByte(' ')
		}
		b.WriteString("</description></item>\n")
		entries = append(entries, hub.Entry{ID: id, Link: id})
	}
	b.WriteString("</channel></rss>\n")
	return []byte(b.String()), entries
}

// sourceTables are a followed source's own tables (with their indexes):
// its fetch state, its last body and its seen entry ids. The node's log
// (events, items) is the node's, as large as its max_items asks.
var sourceTables = []string{"sources", "source_bodies", "seen"}

// sourceTableBytes is what each of sourceTables takes on disk, indexes,
// overflow and TOAST included.
func sourceTableBytes(ctx context.Context, t *testing.T, s *sqlStore) map[string]int64 {
	t.Helper()
	return tableBytes(ctx, t, s, sourceTables...)
}

// tableBytes is what each table takes on disk, indexes, overflow and
// TOAST included (PostgreSQL after VACUUM).
func tableBytes(ctx context.Context, t *testing.T, s *sqlStore, tables ...string) map[string]int64 {
	t.Helper()
	if s.backend == backendPostgres {
		if _, err := s.write.ExecContext(ctx, `VACUUM ANALYZE `+strings.Join(tables, ", ")); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]int64{}
	for _, table := range tables {
		var n int64
		var err error
		if s.backend == backendSQLite {
			err = s.read.QueryRowContext(ctx, `SELECT COALESCE(SUM(d.pgsize), 0) FROM dbstat d
				JOIN sqlite_schema m ON m.name = d.name WHERE m.tbl_name = $1`, table).Scan(&n)
		} else {
			// The main fork, TOAST and indexes, without the free space
			// and visibility maps (a few pages whatever the size).
			err = s.read.QueryRowContext(ctx, `SELECT pg_relation_size(c.oid)
				+ COALESCE((SELECT pg_relation_size(c.reltoastrelid) + pg_indexes_size(c.reltoastrelid) WHERE c.reltoastrelid <> 0), 0)
				+ pg_indexes_size(c.oid)
				FROM pg_class c WHERE c.oid = $1::regclass`, table).Scan(&n)
		}
		if err != nil {
			t.Fatalf("size of %s: %v", table, err)
		}
		out[table] = n
	}
	return out
}

// TestBytesPerFollowedSource fills sources as the polling benchmark
// does (the baseline of a 23 KB feed of 20 entries; a quarter of them
// then a fetch with one new entry) through ApplyFetch and measures what
// their own tables take per source on both backends, once for a feed
// served as RSS, which keeps no body (hub.KeepsBody), and once for a feed
// whose origin sends RFC 3229 deltas, which keeps it. With the body kept
// as fetched and a row per seen id they took 26 KiB on SQLite and 15 KiB
// on PostgreSQL; with the body compressed 8 and 12; with the seen ids one
// list each, 6.7 and 8.9, most of it the compressed body (5.5 KB), and
// under 1 KiB without the body.
func TestBytesPerFollowedSource(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a few hundred sources")
	}
	const sources = 400
	for _, c := range []struct {
		name   string
		deltas bool
		budget map[string]int64
	}{
		{"an RSS feed", false, map[string]int64{backendSQLite: 1 << 10, backendPostgres: 1536}},
		{"a feed whose origin sends deltas", true, map[string]int64{backendSQLite: 7 << 10, backendPostgres: 10 << 10}},
	} {
		for _, bc := range backendCases() {
			t.Run(c.name+"/"+bc.name, func(t *testing.T) {
				ctx := context.Background()
				s := bc.migrated(t)
				t0 := time.Date(2031, 5, 6, 7, 0, 0, 0, time.UTC)
				var rawBody int
				for i := range sources {
					src, _, err := s.EnsureSource(ctx, fmt.Sprintf("http://origin.bench.example/%d/feed.xml", i))
					if err != nil {
						t.Fatal(err)
					}
					last := 40
					if i%4 == 0 {
						last = 41 // a quarter changed once since their baseline
					}
					for v := 40; v <= last; v++ {
						body, entries := sampleFeed(i, v)
						rawBody = len(body)
						st := src.SourceState
						st.IsFeed, st.ContentType, st.BodyHash = true, "application/rss+xml", fmt.Sprintf("%x", v)
						if hub.KeepsBody(&hub.FetchResult{IsFeed: true, ContentType: st.ContentType, Body: body, Deltas: c.deltas}) {
							st.Body = body
						}
						st.ETag, st.LastModified = fmt.Sprintf(`"%d-%d"`, i, v), "Tue, 06 May 2031 07:00:00 GMT"
						st.LastFetchAt, st.LastStatus, st.NextFetchAt = t0.Add(time.Duration(v)*time.Minute), 200, t0.Add(time.Hour)
						if _, err := s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st, Changed: true, Entries: entries}); err != nil {
							t.Fatal(err)
						}
					}
				}
				sizes := sourceTableBytes(ctx, t, s)
				var total int64
				var parts []string
				for _, table := range sourceTables {
					total += sizes[table]
					parts = append(parts, fmt.Sprintf("%s %.2f KiB", table, float64(sizes[table])/sources/1024))
				}
				t.Logf("%s, %s, per source (a body of %d bytes, 20 or 21 seen ids): %.2f KiB (%s)",
					bc.name, c.name, rawBody, float64(total)/sources/1024, strings.Join(parts, ", "))
				if total > sources*c.budget[bc.name] {
					t.Fatalf("%.2f KiB per source, want at most %.1f KiB", float64(total)/sources/1024, float64(c.budget[bc.name])/1024)
				}
			})
		}
	}
}

// TestBytesPerNodeItems keeps the 20 entries of the polling benchmark's
// feed (sampleEntry) as the items of 400 nodes, on both backends, once
// as rows were stored before migration 0023 (every column as it is) and
// once through KeepItems (packed), and logs what the node's log and
// items take per node, and the bytes of each text column. Packed, the
// events are a third or less of what they were.
func TestBytesPerNodeItems(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a few hundred nodes")
	}
	const nodes, entries = 400, 20
	for _, bc := range backendCases() {
		t.Run(bc.name, func(t *testing.T) {
			var perNode [2]float64
			for round, packed := range []bool{false, true} {
				ctx := context.Background()
				s := bc.migrated(t)
				for i := range nodes {
					n := &hub.Node{Name: fmt.Sprintf("n%d", i), NodeConfig: hub.DefaultNodeConfig()}
					if err := s.CreateNode(ctx, n); err != nil {
						t.Fatal(err)
					}
					events := make([]hub.Event, entries)
					for e := range events {
						events[e] = sampleEntry(i, 40-e)
					}
					if !packed {
						for e, ev := range events {
							insertAsBefore(ctx, t, s, n.ID, int64(e+1), ev)
						}
						continue
					}
					if kept, err := s.KeepItems(ctx, n.ID, events); err != nil || kept != entries {
						t.Fatalf("kept %d, %v", kept, err)
					}
				}
				sizes := tableBytes(ctx, t, s, "events", "items")
				columns := eventColumnBytes(ctx, t, s)
				perNode[round] = float64(sizes["events"]) / nodes / 1024
				t.Logf("%s, %s, per node of %d items: events %.2f KiB, items %.2f KiB; text columns per event: %s",
					bc.name, map[bool]string{false: "as before 0023", true: "packed"}[packed], entries,
					float64(sizes["events"])/nodes/1024, float64(sizes["items"])/nodes/1024, columns)
			}
			if perNode[1] > perNode[0]/2.5 {
				t.Fatalf("events per node: %.2f KiB packed, %.2f KiB before; want a third or less", perNode[1], perNode[0])
			}
		})
	}
}

// eventColumnBytes is what each text column of events holds per row, on
// average: the stored length on SQLite, pg_column_size on PostgreSQL.
func eventColumnBytes(ctx context.Context, t *testing.T, s *sqlStore) string {
	t.Helper()
	size := "length"
	if s.backend == backendPostgres {
		size = "pg_column_size"
	}
	var parts []string
	for _, col := range []string{"item_id", "payload", "title", "summary", "link", "updated", "created", "encoding"} {
		var avg float64
		if err := s.read.QueryRowContext(ctx, `SELECT CAST(COALESCE(AVG(COALESCE(`+size+`(`+col+`), 0)), 0) AS DOUBLE PRECISION) FROM events`).Scan(&avg); err != nil {
			t.Fatalf("size of events.%s: %v", col, err)
		}
		parts = append(parts, fmt.Sprintf("%s %.0f", col, avg))
	}
	return strings.Join(parts, ", ")
}
