package hub

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Changed says the resource at rawURL changed: every source whose URL or
// site is rawURL is fetched as soon as possible. note, when set, is a
// trusted announcement (CNWS) that notifies even if the fetch shows no
// change. It returns how many sources were scheduled.
func (h *Hub) Changed(ctx context.Context, rawURL string, note *ChangeNote) (int, error) {
	if canon, err := CanonicalURL(rawURL); err == nil {
		rawURL = canon // sources are stored in canonical form
	}
	srcs, err := h.stores.Sources.SourcesMatching(ctx, rawURL)
	if err != nil {
		return 0, fmt.Errorf("find sources of %s: %w", rawURL, err)
	}
	n := 0
	for _, s := range srcs {
		if s.Gone {
			continue
		}
		if err := h.stores.Sources.MarkSourceDue(ctx, s.ID, h.now(), note); err != nil {
			return n, fmt.Errorf("schedule fetch of %s: %w", s.URL, err)
		}
		n++
	}
	if n > 0 {
		h.WakeFetcher()
	}
	return n, nil
}

// Ping records a publisher's ping and schedules fetches of the sources
// matching any of urls; it returns how many sources, each counted once.
// p.URL is recorded as the URL the publisher submitted (changes.xml shows
// what was submitted), the first non-empty one of urls when it is empty;
// urls may then be empty, for a ping that names nothing pingd fetches. It
// fails only when the ping could not be stored, so a ping is never
// acknowledged and lost; but with Config.PingCommitDelay it returns 0
// once the ping is queued (while Run runs), or ErrPingQueueFull, and the
// ping is stored within the delay.
func (h *Hub) Ping(ctx context.Context, p Ping, urls []string, note *ChangeNote) (int, error) {
	canonical := make([]string, 0, len(urls))
	first := ""
	for _, u := range urls {
		if u == "" {
			continue
		}
		c, err := CanonicalURL(u)
		if err != nil {
			return 0, err
		}
		canonical = append(canonical, c)
		if first == "" {
			first = u
		}
	}
	if p.URL == "" {
		p.URL = first
	}
	if p.URL == "" {
		return 0, fmt.Errorf("%w: a ping names no URL", ErrInvalid)
	}
	for _, u := range []string{p.URL, p.FeedURL} {
		if u == "" || slices.Contains(urls, u) {
			continue // empty, or canonicalised above
		}
		if err := ValidURL(u); err != nil {
			return 0, err
		}
	}
	if p.ReceivedAt.IsZero() {
		p.ReceivedAt = h.now()
	}
	// The ping and the due times of its sources are one transaction: the
	// publisher waits for its commit, and a ping naming nothing pingd
	// follows (most of them) costs no look-up of its own.
	slices.Sort(canonical)
	canonical = slices.Compact(canonical)
	if h.pingQueue != nil {
		// Answered once queued (Config.PingCommitDelay): how many
		// sources it makes due is known only after the commit.
		queued, err := h.pingQueue.add(ctx, queuedPing{rec: PingToRecord{Ping: &p, URLs: canonical, Note: note}, urls: urls})
		if queued || err != nil {
			return 0, err
		}
	}
	marked, err := h.stores.Pings.RecordPingMarkingDue(ctx, &p, canonical, h.now(), note)
	if err != nil {
		return 0, fmt.Errorf("record ping: %w", err)
	}
	if len(marked) > 0 {
		h.WakeFetcher()
	}
	h.pingRecorded(ctx, PingRecord{Ping: p, URLs: urls, Matched: len(marked)})
	return len(marked), nil
}

// Pings returns recent pings and the total count (changes.xml).
func (h *Hub) Pings(ctx context.Context, since time.Time, limit int) ([]Ping, int64, error) {
	return h.stores.Pings.Pings(ctx, since, limit)
}

// Source returns a source by id.
func (h *Hub) Source(ctx context.Context, id int64) (*Source, error) {
	return h.stores.Sources.Source(ctx, id)
}

// Sources lists the sources followed by nodes.
func (h *Hub) Sources(ctx context.Context) ([]Source, error) { return h.stores.Sources.Sources(ctx) }
