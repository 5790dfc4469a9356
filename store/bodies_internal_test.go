package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
)

// TestDeletingASourceDeletesItsBody: a source deleted (DeleteUnused, once
// no node follows it) takes its body with it, on both backends.
func TestDeletingASourceDeletesItsBody(t *testing.T) {
	for _, bc := range backendCases() {
		t.Run(bc.name, func(t *testing.T) {
			ctx := context.Background()
			s := bc.migrated(t)
			src, _, err := s.EnsureSource(ctx, "https://example.org/feed")
			if err != nil {
				t.Fatal(err)
			}
			n := &hub.Node{Name: "n", SourceID: src.ID, NodeConfig: hub.DefaultNodeConfig()}
			if err := s.CreateNode(ctx, n); err != nil {
				t.Fatal(err)
			}
			st := src.SourceState
			st.Body, st.Baselined = []byte("<rss/>"), true
			if _, err := s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st, Changed: true}); err != nil {
				t.Fatal(err)
			}
			bodies := func() int {
				t.Helper()
				var n int
				if err := s.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM source_bodies`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			if got := bodies(); got != 1 {
				t.Fatalf("%d bodies stored, want 1", got)
			}
			if err := s.DeleteNode(ctx, n.Name); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			for _, at := range []time.Time{now, now.Add(2 * time.Hour)} { // mark, then delete after the grace
				if _, _, err := s.DeleteUnused(ctx, at, at.Add(-24*time.Hour), at.Add(-time.Hour)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Source(ctx, src.ID); err == nil {
				t.Fatal("the source was not deleted")
			}
			if got := bodies(); got != 0 {
				t.Fatalf("%d bodies left after their source was deleted", got)
			}
		})
	}
}

// TestUnchangedPollsLeaveBodiesUnwritten measures what claiming sources
// with large bodies and storing their unchanged outcomes writes to
// SQLite's write-ahead log. Kept in the sources row, each body was written
// again by both (SQLite rewrites a whole record on any UPDATE); apart, a
// source's fetch state is a small record, many to a page.
func TestUnchangedPollsLeaveBodiesUnwritten(t *testing.T) {
	const (
		sources  = 32
		bodySize = 100 << 10 // a typical feed is 20–200 KB
		// Generous: a claim or an unchanged outcome writes a few hundred
		// bytes of row and index pages a source; a body is 100 KiB.
		maxPerSource = 8 << 10
	)
	ctx := context.Background()
	s, path := openTestSQLite(t, Options{})
	t0 := time.Date(2031, 5, 6, 7, 0, 0, 0, time.UTC)
	for i := range sources {
		src, _, err := s.EnsureSource(ctx, fmt.Sprintf("https://example.org/%d.xml", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CreateNode(ctx, &hub.Node{Name: fmt.Sprint(i), SourceID: src.ID, NodeConfig: hub.DefaultNodeConfig()}); err != nil {
			t.Fatal(err)
		}
		st := src.SourceState
		st.Body, st.Baselined, st.IsFeed, st.NextFetchAt = make([]byte, bodySize), true, true, t0
		rand.Read(st.Body)
		if _, err := s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st, Changed: true}); err != nil {
			t.Fatal(err)
		}
	}
	walGrowth := func(write func()) int64 {
		t.Helper()
		var busy, frames, done int
		if err := s.write.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &done); err != nil || busy != 0 {
			t.Fatalf("checkpoint: busy %d, %v", busy, err)
		}
		write()
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}

	var claimed []hub.Source
	claim := walGrowth(func() {
		var err error
		if claimed, err = s.ClaimDueSources(ctx, t0, sources, "me", t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	})
	// The claim leaves the bodies where they are; a fetch reads one only
	// for a delta.
	if len(claimed) != sources || claimed[0].Body != nil {
		t.Fatalf("claimed %d sources, the first with a body of %d bytes, want none", len(claimed), len(claimed[0].Body))
	}
	if body, err := s.SourceBody(ctx, claimed[0].ID); err != nil || len(body) != bodySize {
		t.Fatalf("SourceBody: %d bytes, %v; want %d", len(body), err, bodySize)
	}
	outs := make([]hub.FetchOutcome, len(claimed))
	for i, src := range claimed {
		st := src.SourceState
		st.LastFetchAt, st.LastStatus, st.Unchanged = t0, 304, 1
		st.NextFetchAt, st.NextFetchReason = t0.Add(time.Hour), "ttl"
		outs[i] = hub.FetchOutcome{SourceID: src.ID, State: st}
	}
	unchanged := walGrowth(func() {
		if err := s.ApplyUnchangedFetches(ctx, outs); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("write-ahead log per source: claim %d bytes, unchanged outcome %d bytes (body %d bytes)",
		claim/sources, unchanged/sources, bodySize)
	if claim > sources*maxPerSource || unchanged > sources*maxPerSource {
		t.Fatalf("write-ahead log per source: claim %d bytes, unchanged outcome %d bytes; want under %d",
			claim/sources, unchanged/sources, maxPerSource)
	}
}

// TestBodiesAreStoredCompressed: a changed fetch stores its body
// compressed (a feed of 23 KB in under a third), an incompressible one
// as fetched, and both read back as they came through SourceBody and
// Source, on both backends.
func TestBodiesAreStoredCompressed(t *testing.T) {
	feed, _ := sampleFeed(1, 40)
	noise := make([]byte, 4096)
	rand.Read(noise)
	for _, bc := range backendCases() {
		t.Run(bc.name, func(t *testing.T) {
			ctx := context.Background()
			s := bc.migrated(t)
			for _, c := range []struct {
				name     string
				body     []byte
				encoding string
				maxBytes int
			}{
				{"feed", feed, bodyZstd, len(feed) / 3},
				{"noise", noise, bodyAsFetched, len(noise)},
			} {
				src, _, err := s.EnsureSource(ctx, "https://example.org/"+c.name)
				if err != nil {
					t.Fatal(err)
				}
				st := src.SourceState
				st.Body, st.Baselined = c.body, true
				if _, err := s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st, Changed: true}); err != nil {
					t.Fatal(err)
				}
				var encoding string
				var stored []byte
				if err := s.read.QueryRowContext(ctx, `SELECT encoding, body FROM source_bodies WHERE source_id = $1`, src.ID).Scan(&encoding, &stored); err != nil {
					t.Fatal(err)
				}
				if encoding != c.encoding || len(stored) > c.maxBytes {
					t.Errorf("%s: stored as %q in %d bytes, want %q in at most %d", c.name, encoding, len(stored), c.encoding, c.maxBytes)
				}
				if body, err := s.SourceBody(ctx, src.ID); err != nil || !bytes.Equal(body, c.body) {
					t.Errorf("%s: SourceBody gave %d bytes, %v; want the %d fetched", c.name, len(body), err, len(c.body))
				}
				if got, err := s.Source(ctx, src.ID); err != nil || !bytes.Equal(got.Body, c.body) {
					t.Errorf("%s: Source gave a body of %d bytes, %v; want the %d fetched", c.name, len(got.Body), err, len(c.body))
				}
			}
		})
	}
}

// TestBodiesStoredBeforeCompressionStillRead: an upgrade rewrites no
// body: a row stored as fetched (no encoding, every row before migration
// 0022) reads as it is, and the source's next change stores it
// compressed. A row in an encoding this binary does not know, or a
// damaged one, is an error, not a body.
func TestBodiesStoredBeforeCompressionStillRead(t *testing.T) {
	feed, _ := sampleFeed(2, 40)
	for _, bc := range backendCases() {
		t.Run(bc.name, func(t *testing.T) {
			ctx := context.Background()
			s := bc.migrated(t)
			src, _, err := s.EnsureSource(ctx, "https://example.org/old")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.write.ExecContext(ctx, `INSERT INTO source_bodies (source_id, body) VALUES ($1, $2)`, src.ID, feed); err != nil {
				t.Fatal(err)
			}
			if body, err := s.SourceBody(ctx, src.ID); err != nil || !bytes.Equal(body, feed) {
				t.Fatalf("old row: SourceBody gave %d bytes, %v; want %d", len(body), err, len(feed))
			}
			changed, _ := sampleFeed(2, 41)
			st := src.SourceState
			st.Body, st.Baselined = changed, true
			if _, err := s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st, Changed: true}); err != nil {
				t.Fatal(err)
			}
			var encoding string
			if err := s.read.QueryRowContext(ctx, `SELECT encoding FROM source_bodies WHERE source_id = $1`, src.ID).Scan(&encoding); err != nil || encoding != bodyZstd {
				t.Fatalf("after a change: encoding %q, %v; want %q", encoding, err, bodyZstd)
			}
			if body, err := s.SourceBody(ctx, src.ID); err != nil || !bytes.Equal(body, changed) {
				t.Fatalf("after a change: SourceBody gave %d bytes, %v; want %d", len(body), err, len(changed))
			}

			for _, bad := range []struct{ encoding, body string }{{"br", "x"}, {bodyZstd, "not zstd at all"}} {
				if _, err := s.write.ExecContext(ctx, `UPDATE source_bodies SET encoding = $1, body = $2 WHERE source_id = $3`,
					bad.encoding, []byte(bad.body), src.ID); err != nil {
					t.Fatal(err)
				}
				if body, err := s.SourceBody(ctx, src.ID); err == nil {
					t.Errorf("%q body %q: SourceBody gave %q and no error", bad.encoding, bad.body, body)
				}
				if _, err := s.Source(ctx, src.ID); err == nil || errors.Is(err, hub.ErrNotFound) {
					t.Errorf("%q body %q: Source gave %v, want an error that is not ErrNotFound", bad.encoding, bad.body, err)
				}
			}
		})
	}
}

// FuzzDecodeBody: whatever a source_bodies row holds, decoding it gives
// a body or an error, never a panic, and a stored body reads back as it
// was.
func FuzzDecodeBody(f *testing.F) {
	feed, _ := sampleFeed(3, 40)
	_, packed := encodeBody(feed)
	f.Add(bodyZstd, packed)
	f.Add(bodyAsFetched, []byte("<rss/>"))
	f.Add(bodyZstd, []byte{0x28, 0xb5, 0x2f, 0xfd})
	f.Fuzz(func(t *testing.T, encoding string, stored []byte) {
		if body, err := decodeBody(encoding, stored); err == nil && len(body) > maxStoredBodyBytes {
			t.Fatalf("decoded %d bytes, over the %d allowed", len(body), maxStoredBodyBytes)
		}
		// What is stored now reads back.
		enc, again := encodeBody(stored)
		if body, err := decodeBody(enc, again); err != nil || !bytes.Equal(body, stored) {
			t.Fatalf("stored as %q: read back %d bytes, %v; want %d", enc, len(body), err, len(stored))
		}
	})
}
