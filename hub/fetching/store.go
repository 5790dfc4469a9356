package fetching

import (
	"context"
	"time"

	"github.com/pingd/pingd/hub"
)

// Store is what the engine claims, reads and stores: due sources under
// leases, a claimed source's last body, the outcomes of fetches, and the
// sources left leased by a process that died. The store package
// implements it; every method must be safe for concurrent use.
type Store interface {
	// Source returns a source by id, with its Body; hub.ErrNotFound.
	Source(ctx context.Context, id int64) (*hub.Source, error)
	// SourceBody returns only the source's last body: nil when it has none
	// or the source no longer exists.
	SourceBody(ctx context.Context, id int64) ([]byte, error)
	// ClaimDueSources leases up to limit sources due at now that are not
	// gone, not leased by anyone else and followed by a node, the earliest
	// due first, each with its Subscribers counted (one query for the
	// claim, not one per fetch), without its Body (SourceBody reads it
	// when an origin answers with a delta).
	ClaimDueSources(ctx context.Context, now time.Time, limit int, owner string, until time.Time) ([]hub.Source, error)
	// NextSourceDue returns the earliest due time after now of a source
	// that is not gone and is followed by a node, zero when there is none:
	// when the loop, having claimed all that was due, claims next.
	NextSourceDue(ctx context.Context, now time.Time) (time.Time, error)
	// ApplyFetch stores a fetch's outcome in one transaction: the source
	// state (releasing the lease and clearing a pending note it consumed),
	// the ids seen, and the events of every node of the source. See
	// hub.FetchOutcome and hub.FetchApplied. What the fetch brings is the hub's
	// to decide: the store reads the source's baseline flag and latest
	// ping and which ids are unseen, and writes what hub.FetchNewsOf,
	// hub.FetchNews.ForNode and hub.NextFetchAfter (hub/fetchrules.go) decide from
	// them: on the baseline every entry id is recorded as seen and no item
	// is told: a feed's entries (hub.FetchNews.Kept, the newest MaxItems of
	// them) are kept as each node's items as the log store's KeepItems keeps them, cursors
	// standing at the end of a node's log moved past them, and implicit
	// nodes without a title take hub.FetchNews.Title; a node takes at most its
	// MaxItems of the newest new entries. A cursor only moves forward:
	// a delivery's or a digest's save never take one back. It sets the stored LastNewItems to the number of new
	// entries. The body (State.Body) is written only when o.Changed: an
	// outcome that did not change the representation keeps the stored
	// one, whatever State.Body holds (sources read without it).
	//
	// Every new id is recorded as seen,
	// published or not, and those left out are never announced. A source
	// without nodes records its ids and publishes nothing. When new ids
	// were recorded, the ids the fetch did not show beyond the
	// hub.HiddenSeenKept shown last are forgotten.
	//
	// It is the lease holder's write: when the source's lease is no
	// longer o.Owner's (it ran out and another process took it), nothing
	// is written and it returns hub.ErrLeaseLost.
	ApplyFetch(ctx context.Context, o hub.FetchOutcome) (hub.FetchApplied, error)
	// ApplyUnchangedFetches stores several outcomes that change nothing
	// but their sources' fetch state (hub.FetchOutcome.Unchanged) in one
	// transaction, with one statement for many sources where the database
	// allows: what ApplyFetch would store for each, the representation
	// (body, hash, content type, title, description, site), the seen ids
	// and a pending note left as they are. Each lease is released, and a
	// ping stored while the fetch ran makes the source due again
	// (hub.NextFetchAfter, decided in the statement itself). Sources removed
	// meanwhile are skipped, and so are those whose lease is no longer
	// their Owner's (see ApplyFetch). An outcome that is not Unchanged is refused
	// with hub.ErrInvalid and nothing is written.
	ApplyUnchangedFetches(ctx context.Context, outs []hub.FetchOutcome) error
	// SourcesLeasedByOthers lists, without their Body, the sources whose
	// lease is held by someone other than owner and has not run out at
	// now: a few, where Sources would read every source.
	SourcesLeasedByOthers(ctx context.Context, owner string, now time.Time) ([]hub.Source, error)
	// SourcesLeasedBy lists, without their Body, the sources whose lease
	// owner holds, run out or not: what a process of that name left
	// leased when it died.
	SourcesLeasedBy(ctx context.Context, owner string) ([]hub.Source, error)
}
