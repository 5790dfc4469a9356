package hub_test

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// dbUse is what the SQLite file holds: rows of the tables a feed grows,
// and the bytes of the pages in use.
type dbUse struct {
	seen, events, items int
	bytes               int64
}

func (e *env) dbUse() dbUse {
	e.t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.dbPath+"?mode=ro")
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	var u dbUse
	err = db.QueryRowContext(e.t.Context(), `SELECT (SELECT COALESCE(SUM(id_count), 0) FROM seen), (SELECT COUNT(*) FROM events),
		(SELECT COUNT(*) FROM items),
		((SELECT page_count FROM pragma_page_count()) - (SELECT freelist_count FROM pragma_freelist_count())) *
		(SELECT page_size FROM pragma_page_size())`).Scan(&u.seen, &u.events, &u.items, &u.bytes)
	if err != nil {
		e.t.Fatal(err)
	}
	return u
}

// floodRound is a feed of n entries, all new in each round, newest first.
func floodRound(round, n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%d-%05d", round, i)
	}
	return rss{title: "Flood", items: items(ids...)}.String()
}

// floodEntries is how many new entries each fetch of the flood shows:
// a hundred times a node's max_items, and enough that the ids it stops
// showing pass hub.MaxHiddenSeen within a few rounds.
const floodEntries = hub.MaxHiddenSeen / 2

// fetchFlood pings the flood's source and waits for the fetch, polling
// the store gently: a fetch of thousands of entries takes a while under
// the race detector.
func (e *env) fetchFlood(srcID int64) *hub.Source {
	e.t.Helper()
	at := e.clock.Advance(time.Second)
	if _, err := e.hub.Changed(e.t.Context(), e.origin.url("/flood"), nil); err != nil {
		e.t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if src := e.source(srcID); src.LastFetchAt.Equal(at) && src.LeaseOwner == "" {
			return src
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no fetch of the flood at %v", at)
		}
	}
}

// TestAFloodOfNewEntriesStaysBounded: a feed that shows thousands of new
// entries at every fetch publishes to each node only the newest up to its
// max_items, records the rest as seen, and keeps the database bounded
// however often it is fetched (a feed of 50,000 new entries a fetch grew
// it by 30–41 MB each time). A feed of 50,000 entries, more than a
// document may carry, is refused whole.
func TestAFloodOfNewEntriesStaysBounded(t *testing.T) {
	e := newEnv(t, envOptions{})
	doc := e.origin.serve("/flood", floodRound(0, floodEntries), false)
	e.run()
	many := e.createNode("many", "/flood")
	// CreateNode waits for the baseline only up to BaselineWait: on a busy
	// machine the baseline of this big document may still run, and would
	// then fetch round 1's document as its baseline.
	testenv.WaitFor(t, 20*time.Second, "the flood's baseline", func() bool {
		src := e.source(many.SourceID)
		return src.Baselined && src.LeaseOwner == ""
	})
	e.createNode("few", "/flood") // the same source
	if err := e.hub.ConfigureNode(t.Context(), "few", hub.NodeConfig{MaxItems: 5}); err != nil {
		t.Fatal(err)
	}

	var uses []dbUse
	for round := 1; round <= 5; round++ {
		doc.set(floodRound(round, floodEntries))
		src := e.fetchFlood(many.SourceID)
		if src.LastError != "" || src.LastNewItems != floodEntries {
			t.Fatalf("round %d: %d new, error %q", round, src.LastNewItems, src.LastError)
		}
		// Each node got the newest entries (the first in the document) up
		// to its max_items, oldest first: its log grew by that much (the
		// log window, far larger, is the store tests' business).
		for _, n := range []struct {
			node *hub.Node
			keep int
		}{{many, hub.DefaultMaxItems}, {e.node("few"), 5}} {
			var want []string
			for i := n.keep - 1; i >= 0; i-- {
				want = append(want, fmt.Sprintf("r%d-%05d", round, i))
			}
			got := itemIDs(e.events(n.node.ID))
			if !slices.Equal(got[max(len(got)-n.keep, 0):], want) || len(got) != round*n.keep {
				t.Fatalf("round %d: the log of %s holds %d items ending %v, want %d ending %v",
					round, n.node.Name, len(got), got[max(len(got)-3, 0):], round*n.keep, want[len(want)-3:])
			}
		}
		uses = append(uses, e.dbUse())
	}
	t.Logf("database after each round: %+v", uses)
	last := uses[len(uses)-1]
	if bound := floodEntries + hub.MaxHiddenSeen; last.seen > bound {
		t.Errorf("%d ids remembered, bound %d", last.seen, bound)
	}
	// Besides, each node keeps the baseline's newest entries as its
	// first items, up to the max_items it had when it was made.
	if want := 5*(hub.DefaultMaxItems+5) + 2*hub.DefaultMaxItems; last.events != want {
		t.Errorf("%d events kept, want %d: max_items a node a fetch", last.events, want)
	}
	// From round 3 on, the ids shown two rounds before go: each round
	// drops about as much as it adds.
	if grown := last.bytes - uses[2].bytes; grown > uses[2].bytes/10 {
		t.Errorf("the database grew by %d KiB from round 3 to round 5 (to %d KiB)", grown>>10, last.bytes>>10)
	}

	// A document of 50,000 entries is refused: nothing is published.
	before := e.events(many.ID)
	doc.set(floodRound(6, 50_000))
	src := e.fetchFlood(many.SourceID)
	if !strings.Contains(src.LastError, fmt.Sprintf("more than %d entries", feed.MaxEntries)) || src.ConsecutiveErrors != 1 {
		t.Errorf("a feed of 50,000 entries: error %q, %d in a row", src.LastError, src.ConsecutiveErrors)
	}
	if after := e.events(many.ID); !slices.Equal(itemIDs(after), itemIDs(before)) {
		t.Errorf("the refused document published %d events", len(after)-len(before))
	}
}
