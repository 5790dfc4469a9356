package hub

import (
	"context"
	"time"
)

// FetchEngine is the fetch loop (package hub/fetching): it claims due
// sources, fetches them within each host's politeness and stores their
// outcomes. The hub's use cases make sources due through the
// SourceStore and then talk to the engine only through this seam: wake it,
// and wait for the fetch that gives a new source its baseline. Hub.Run
// runs it beside the maintenance loop.
type FetchEngine interface {
	// Run fetches due sources until ctx ends and returns once its fetches
	// have stopped and their outcomes are stored. published is told of
	// every node whose log a stored fetch grew.
	Run(ctx context.Context, published func(nodeID int64)) error
	// Wake makes the loop look for due sources now; it never blocks.
	Wake()
	// AwaitFetch waits, within the engine's bound, until the fetch of src
	// made due at `at` is over (stored, failed or put off), and returns at
	// once when no loop runs in this process. A WaitObserver in ctx hears
	// of the wait (StartSlowWait).
	AwaitFetch(ctx context.Context, src *Source, at time.Time)
	// Load is what the loop holds now, Limits the bounds it works within.
	Load() FetchLoad
	Limits() FetchLimits
}

// FetchLoad is what this process's fetch loop holds at the moment.
type FetchLoad struct {
	// Running counts the fetches under way.
	Running int
	// WaitingForHost counts claimed sources waiting for their host: its
	// fetches at once, its spacing.
	WaitingForHost int
	// HostsPaused counts the hosts left alone after a 429 or 503.
	HostsPaused int
}

// FetchLimits are the bounds the fetch loop works within.
type FetchLimits struct {
	Workers     int
	PerHost     int
	HostSpacing time.Duration
}

// FetchLoad reports what the fetch loop holds now (nothing without one).
func (h *Hub) FetchLoad() FetchLoad {
	if h.fetches == nil {
		return FetchLoad{}
	}
	return h.fetches.Load()
}

// FetchLimits reports the fetch loop's bounds, defaults applied (zero
// without one).
func (h *Hub) FetchLimits() FetchLimits {
	if h.fetches == nil {
		return FetchLimits{}
	}
	return h.fetches.Limits()
}

// WakeFetcher makes the fetch loop look for due sources now.
func (h *Hub) WakeFetcher() {
	if h.fetches != nil {
		h.fetches.Wake()
	}
}

// The NextFetchReason of a source the fetch loop gives back unfetched:
// its host had enough of pingd's requests waiting (ReasonHostBusy) or had
// asked to be left alone (ReasonHostPaused); its origin asked to be left
// alone for a while (ReasonRetryAfter, the scheduler's reason of the same
// name); its fetch was cut off by shutdown or by the death of the process
// that had claimed it (ReasonInterrupted).
const (
	ReasonHostBusy    = "host busy"
	ReasonHostPaused  = "host asked to wait"
	ReasonRetryAfter  = "retry-after"
	ReasonInterrupted = "fetch interrupted"
)
