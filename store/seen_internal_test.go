package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
)

// TestSeenIDsKeepTheFeedsWindow: a feed of 20 entries that gains one at
// every fetch keeps, after hundreds of fetches, the ids it shows and
// hub.HiddenSeenKept more, not every id it ever showed; an entry that
// dropped out of the window lately is not new when it comes back, one
// pushed beyond the margin is. On both backends.
func TestSeenIDsKeepTheFeedsWindow(t *testing.T) {
	const (
		window  = 20
		fetches = 400
	)
	margin := hub.HiddenSeenKept(window)
	if margin >= fetches-window {
		t.Fatalf("the margin (%d) must be smaller than the ids that drop out (%d)", margin, fetches-window)
	}
	id := func(e int) string { return fmt.Sprintf("https://example.org/posts/%d", e) }
	windowAt := func(newest int) []hub.Entry {
		var out []hub.Entry
		for e := newest - window + 1; e <= newest; e++ {
			out = append(out, hub.Entry{ID: id(e)})
		}
		return out
	}
	for _, bc := range backendCases() {
		t.Run(bc.name, func(t *testing.T) {
			ctx := context.Background()
			s := bc.migrated(t)
			src, _, err := s.EnsureSource(ctx, "https://example.org/feed")
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Date(2031, 5, 6, 7, 0, 0, 0, time.UTC)
			fetch := func(i int, entries []hub.Entry) hub.FetchApplied {
				t.Helper()
				st := src.SourceState
				st.LastFetchAt = t0.Add(time.Duration(i) * time.Minute)
				applied, err := s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st, Changed: true, Entries: entries})
				if err != nil {
					t.Fatal(err)
				}
				return applied
			}
			newest := window - 1
			fetch(0, windowAt(newest)) // the baseline
			for i := 1; i < fetches-window; i++ {
				newest++
				if applied := fetch(i, windowAt(newest)); len(applied.New) != 1 || applied.New[0].ID != id(newest) {
					t.Fatalf("fetch %d: new %+v, want %s alone", i, applied.New, id(newest))
				}
			}
			var kept int
			if err := s.read.QueryRowContext(ctx, `SELECT id_count FROM seen WHERE source_id = $1`, src.ID).Scan(&kept); err != nil {
				t.Fatal(err)
			}
			if kept != window+margin {
				t.Errorf("%d ids remembered after %d fetches, want the window's %d and a margin of %d", kept, fetches-window, window, margin)
			}
			// Back: the entry that dropped out last (within the margin)
			// and one that dropped out long ago (beyond it).
			recent, old := newest-window, newest-window-margin-10
			back := append(windowAt(newest), hub.Entry{ID: id(recent)}, hub.Entry{ID: id(old)})
			applied := fetch(fetches, back)
			if len(applied.New) != 1 || applied.New[0].ID != id(old) {
				t.Fatalf("entries back in the feed: new %+v, want %s alone (%s is within the margin)", applied.New, id(old), id(recent))
			}
		})
	}
}
