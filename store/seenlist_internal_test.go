package store

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"testing"
	"time"
)

// TestSeenListReadsBack: a list reads back as it was written, with its
// times, whether it is stored compressed or plain; the benchmark feed's
// 20 ids take a few bytes each.
func TestSeenListReadsBack(t *testing.T) {
	t0 := seenMicros(time.Date(2031, 5, 6, 7, 0, 0, 0, time.UTC))
	window := seenList{}
	for e := 21; e <= 40; e++ {
		window[fmt.Sprintf("http://origin.bench.example/7/posts/%d.html", e)] = t0
	}
	older := maps.Clone(window)
	for e := range 100 {
		older[fmt.Sprintf("tag:example.org,2031:%d", e)] = t0 - int64(e+1)*60_000_000
	}
	for name, list := range map[string]seenList{
		"empty":    {},
		"one":      {"e1": t0},
		"window":   window,
		"hidden":   older,
		"negative": {"a": -5, "ab": 0, "b": 1 << 60},
		"prefixes": {"": t0, "x": t0, "xx": t0, "xy": t0 - 1},
	} {
		stored := list.encode()
		got, err := decodeSeenList(stored)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !maps.Equal(got, list) {
			t.Fatalf("%s: read back %v, want %v", name, got, list)
		}
		t.Logf("%s: %d ids in %d bytes (format %d)", name, len(list), len(stored), stored[0])
	}
	if stored := window.encode(); len(stored) > 150 || stored[0] != seenZstd {
		t.Errorf("20 ids of one site in %d bytes (format %d), want at most 150, compressed", len(stored), stored[0])
	}
	if got, err := decodeSeenList(nil); err != nil || len(got) != 0 {
		t.Errorf("no value: %v, %v; want an empty list", got, err)
	}
}

// TestSeenListWindow: keepHidden keeps, of the ids not shown by the
// latest fetch, the most recently shown up to its bound, taking the ids
// of one fetch together; forgetBefore drops ids by time; span rounds up.
func TestSeenListWindow(t *testing.T) {
	l := seenList{"a": 1, "b": 2, "c": 2, "d": 3, "now": 10}
	l.keepHidden(10, 2) // hidden: a(1), b(2), c(2), d(3): the third newest is at 2
	if want := (seenList{"d": 3, "now": 10}); !maps.Equal(l, want) {
		t.Errorf("kept %v, want %v (b and c shown together go together)", l, want)
	}
	l = seenList{"a": 1, "b": 2, "now": 10, "later": 11}
	l.keepHidden(10, 2)
	if len(l) != 4 {
		t.Errorf("within the bound, kept %v", l)
	}
	if n := l.forgetBefore(2); n != 1 || len(l) != 3 {
		t.Errorf("forgot %d, kept %v", n, l)
	}
	if got := (seenList{"a": 0, "b": 1_000_001}).span(); got != 2 {
		t.Errorf("span of 1.000001 s = %d, want 2", got)
	}
	if got := (seenList{"a": -1 << 62, "b": 1 << 62}).span(); got != 1<<31-1 {
		t.Errorf("a span beyond an INTEGER column = %d", got)
	}
}

// TestSeenListRefusesDamage: values that are not lists are errors.
func TestSeenListRefusesDamage(t *testing.T) {
	good := seenList{"a": 1, "b": 2}.encode()
	for name, stored := range map[string][]byte{
		"format":         {9, 0},
		"not zstd":       {seenZstd, 1, 2, 3},
		"cut short":      good[:len(good)-1],
		"trailing":       append(bytes.Clone(seenPlainOf(t, good)), 0),
		"time index":     {seenPlain, 1, 2, 1, 5, 0, 1, 'a'},
		"shared too far": {seenPlain, 1, 2, 1, 0, 3, 1, 'a'},
		"out of order":   {seenPlain, 1, 2, 2, 0, 0, 1, 'b', 0, 0, 1, 'a'},
		"duplicate":      {seenPlain, 1, 2, 2, 0, 0, 1, 'a', 0, 0, 1, 'a'},
		"huge count":     {seenPlain, 1, 2, 0xff, 0xff, 0xff, 0x7f},
	} {
		if l, err := decodeSeenList(stored); err == nil {
			t.Errorf("%s: decoded %v", name, l)
		}
	}
}

// seenPlainOf is a stored list in the plain format.
func seenPlainOf(t *testing.T, stored []byte) []byte {
	t.Helper()
	if stored[0] == seenPlain {
		return stored
	}
	codec, err := bodyCodec()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := codec.dec.DecodeAll(stored[1:], nil)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte{seenPlain}, raw...)
}

// FuzzDecodeSeenList: whatever a seen row holds, decoding it gives a list
// or an error, never a panic, and a list decoded reads back the same once
// stored again.
func FuzzDecodeSeenList(f *testing.F) {
	t0 := seenMicros(time.Date(2031, 5, 6, 7, 0, 0, 0, time.UTC))
	window := seenList{}
	for e := range 25 {
		window[fmt.Sprintf("http://origin.bench.example/3/posts/%d.html", e)] = t0 - int64(e%3)
	}
	f.Add(window.encode())
	f.Add(seenList{"e1": t0}.encode())
	f.Add([]byte{seenPlain, 1, 2, 2, 0, 0, 1, 'a', 0, 1, 1, 'b'})
	f.Add([]byte{seenZstd, 0x28, 0xb5, 0x2f, 0xfd})
	f.Fuzz(func(t *testing.T, stored []byte) {
		l, err := decodeSeenList(stored)
		if err != nil {
			return
		}
		again, err := decodeSeenList(l.encode())
		if err != nil || !maps.Equal(again, l) {
			t.Fatalf("stored again: %v, %v; want %v", again, err, l)
		}
	})
}

// TestMigrateMovesSeenIntoLists: migration 0026 turns the seen rows of
// many sources (more than one batch of its data step) into one list
// each, with every id and its time, and the forgetting of old ids works
// on the lists as it did on the rows.
func TestMigrateMovesSeenIntoLists(t *testing.T) {
	for _, bc := range backendCases() {
		t.Run(bc.name, func(t *testing.T) {
			ctx := context.Background()
			s, _ := bc.connect(t)
			if err := s.migrate(ctx, versionNamed(t, bc.name, "seen_lists")-1); err != nil {
				t.Fatal(err)
			}
			t0 := time.Date(2031, 5, 6, 7, 0, 0, 0, time.UTC)
			const sources = 300
			want := map[int64]seenList{}
			for i := range sources {
				var id int64
				if err := s.write.QueryRowContext(ctx, `INSERT INTO sources (original_url, url, created_at) VALUES ($1, $1, $2) RETURNING id`,
					fmt.Sprintf("https://example.org/%d", i), s.timeArg(t0)).Scan(&id); err != nil {
					t.Fatal(err)
				}
				if i%7 == 0 {
					continue // a source without seen ids
				}
				want[id] = seenList{}
				for e := range i%5 + 1 {
					at := t0.Add(-time.Duration(e*e) * 24 * time.Hour).Add(time.Duration(i) * time.Microsecond)
					entry := fmt.Sprintf("https://example.org/%d/posts/%d", i, e)
					if _, err := s.write.ExecContext(ctx, `INSERT INTO seen (source_id, entry_id, seen_at) VALUES ($1, $2, $3)`,
						id, entry, s.timeArg(at)); err != nil {
						t.Fatal(err)
					}
					want[id][entry] = seenMicros(at)
				}
			}
			if err := s.migrate(ctx, 0); err != nil {
				t.Fatal(err)
			}
			var rows, ids int
			if err := s.read.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(id_count), 0) FROM seen`).Scan(&rows, &ids); err != nil {
				t.Fatal(err)
			}
			wantIDs := 0
			for _, l := range want {
				wantIDs += len(l)
			}
			if rows != len(want) || ids != wantIDs {
				t.Fatalf("%d lists of %d ids, want %d of %d", rows, ids, len(want), wantIDs)
			}
			err := s.inTx(ctx, func(tx *txn) error {
				for id, l := range want {
					got, err := s.seenListTx(ctx, tx, id)
					if err != nil {
						return err
					}
					if !maps.Equal(got, l) {
						return fmt.Errorf("source %d: list %v, want %v", id, got, l)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// Ids shown 9 and 16 days before their source's newest are
			// forgotten after a week: sources with 4 or 5 ids.
			wantForgotten := 0
			for _, l := range want {
				wantForgotten += max(len(l)-3, 0)
			}
			if n, err := s.ForgetSeenEntries(ctx, 7*24*time.Hour); err != nil || n != int64(wantForgotten) {
				t.Fatalf("forgot %d, %v; want %d", n, err, wantForgotten)
			}
		})
	}
}
