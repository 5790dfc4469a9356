package hub

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"
)

// Run does the hub's background work until ctx ends: the fetch engine
// (Config.Fetches), removing expired subscriptions, pruning old log
// entries and, with Config.PingCommitDelay, committing the queued pings.
// It returns after its goroutines have stopped, the last queued pings
// committed.
func (h *Hub) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	if h.fetches != nil {
		wg.Go(func() {
			if err := h.fetches.Run(ctx, func(nodeID int64) { h.wake(nodeID) }); err != nil && ctx.Err() == nil {
				h.log.ErrorContext(ctx, "fetch engine stopped", "err", err)
			}
		})
	}
	wg.Go(func() { h.maintenanceLoop(ctx) })
	if h.pingQueue != nil {
		wg.Go(func() { h.runPingCommitter(ctx) })
	}
	wg.Wait()
	return nil
}

// PublishOrder orders a document's entries oldest first: by their update
// time when every entry has one, else by reversing the document order
// (feeds list the newest first).
func PublishOrder(entries []Entry) []Entry {
	out := slices.Clone(entries)
	dated := true
	for _, e := range out {
		if e.Updated.IsZero() {
			dated = false
			break
		}
	}
	if dated {
		// Stable on the reversed document order so ties keep feed semantics.
		slices.Reverse(out)
		sort.SliceStable(out, func(i, j int) bool { return out[i].Updated.Before(out[j].Updated) })
		return out
	}
	slices.Reverse(out)
	return out
}

// SeenRetention is how long the id of an entry a source no longer shows
// is remembered (counted from the source's latest fetch that showed
// entries). Without a bound the record of ids grows for as long as a feed
// publishes; an entry that comes back after it is announced again.
const SeenRetention = 90 * 24 * time.Hour

func (h *Hub) maintenanceLoop(ctx context.Context) {
	expiry := time.NewTicker(time.Minute)
	defer expiry.Stop()
	prune := time.NewTicker(10 * time.Minute)
	defer prune.Stop()
	forget := time.NewTicker(6 * time.Hour)
	defer forget.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-expiry.C:
			removed, err := h.stores.Maintenance.DeleteExpiredSubscriptions(ctx, h.now())
			if err != nil {
				h.log.WarnContext(ctx, "remove expired subscriptions", "err", err)
			}
			for _, s := range removed {
				h.log.InfoContext(ctx, "subscription expired", "node", s.NodeName, "kind", s.Kind, "subscriber", s.Address)
			}
		case <-prune.C:
			if err := h.stores.Maintenance.Prune(ctx, h.now().Add(-h.cfg.PingRetention)); err != nil {
				h.log.WarnContext(ctx, "prune", "err", err)
			}
			if _, _, err := h.DeleteUnused(ctx); err != nil {
				h.log.WarnContext(ctx, "remove unused nodes and sources", "err", err)
			}
		case <-forget.C:
			n, err := h.stores.Maintenance.ForgetSeenEntries(ctx, SeenRetention)
			if err != nil {
				h.log.WarnContext(ctx, "forget entry ids sources no longer show", "err", err)
			} else if n > 0 {
				h.log.InfoContext(ctx, "forgot entry ids sources no longer show", "ids", n, "after", SeenRetention)
			}
		}
	}
}

// canonicalOrEmpty is the canonical form of a URL a fetch found (a
// permanent redirect's target, a feed's site link), "" when it is none:
// sources are looked up by these, in canonical form.
func canonicalOrEmpty(raw string) string {
	c, err := CanonicalURL(raw)
	if err != nil {
		return ""
	}
	return c
}
