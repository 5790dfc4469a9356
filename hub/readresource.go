package hub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ReadResource reports whether rawURL can be read: the check an rssCloud
// registration asks for before anything is stored (the convention of
// rssCloud servers is to read the resource first and to refuse a
// registration for one that cannot be read). A URL a node follows is
// judged by its source's state when that says enough: readable when its
// last fetch succeeded, not when it is gone or failed less than a minute
// ago (anyone may register again and again, and an origin that is failing
// is not hammered for it). Any other URL is fetched once, outside the
// fetch loop, and not again within readAgainAfter: an answer that is not a 2xx after redirects, or no answer,
// is an error. The fetcher's limits hold (its size cap, its guard against
// private addresses); the caller bounds the time through ctx. Nothing is
// stored. Without a fetcher nothing can be read, and nothing is refused.
func (h *Hub) ReadResource(ctx context.Context, rawURL string) error {
	if err := ValidURL(rawURL); err != nil {
		return err
	}
	if h.fetcher == nil {
		return nil
	}
	if n, err := h.NodeForURL(ctx, rawURL, false); err == nil && n.SourceID != 0 {
		src, err := h.stores.Sources.Source(ctx, n.SourceID)
		switch {
		case err != nil && !errors.Is(err, ErrNotFound):
			return fmt.Errorf("source of %s: %w", rawURL, err)
		case err != nil:
		case src.Gone:
			return fmt.Errorf("%s is gone", rawURL)
		case src.ConsecutiveErrors == 0 && src.Baselined:
			return nil
		case src.ConsecutiveErrors > 0 && h.now().Sub(src.LastFetchAt) < retryFailingSourceAfter:
			return fmt.Errorf("the last fetch of %s failed: %s", rawURL, src.LastError)
		}
	}
	now := h.now()
	if ok, err := h.reads.get(rawURL, now); ok {
		return err
	}
	err := h.fetchToRead(ctx, rawURL)
	if ctx.Err() == nil {
		// Not when the caller gave up: that says nothing of the URL.
		h.reads.put(rawURL, now, err)
	}
	return err
}

// fetchToRead fetches rawURL once and says whether it could be read.
func (h *Hub) fetchToRead(ctx context.Context, rawURL string) error {
	res, err := h.fetcher.Fetch(ctx, FetchRequest{URL: rawURL})
	switch {
	case err != nil:
		return err
	case res == nil:
		return errors.New("the fetch gave no result")
	case res.Gone:
		return fmt.Errorf("%s is gone (HTTP %d)", rawURL, res.Status)
	case res.Status < 200 || res.Status > 299:
		return fmt.Errorf("%s answered HTTP %d", rawURL, res.Status)
	}
	return nil
}

// A URL ReadResource fetched is not fetched again for readAgainAfter: its
// answer stands for every registration meanwhile, whoever makes it, so
// registrations repeated from many addresses fetch one URL at most once a
// minute (a followed source that is failing included, whose own last fetch
// answers only for retryFailingSourceAfter).
const (
	readAgainAfter = time.Minute
	// maxRecentReads bounds what is remembered.
	maxRecentReads = 10000
)

type recentRead struct {
	at  time.Time
	err error
}

// recentReads are ReadResource's fetches of the last readAgainAfter, by URL.
type recentReads struct {
	mu sync.Mutex
	m  map[string]recentRead
}

func (r *recentReads) get(rawURL string, now time.Time) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rd, ok := r.m[rawURL]
	if !ok || now.Before(rd.at) || now.Sub(rd.at) >= readAgainAfter {
		return false, nil
	}
	return true, rd.err
}

func (r *recentReads) put(rawURL string, now time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]recentRead{}
	}
	if len(r.m) >= maxRecentReads {
		for u, rd := range r.m {
			if now.Sub(rd.at) >= readAgainAfter || len(r.m) >= maxRecentReads {
				delete(r.m, u)
			}
		}
	}
	r.m[rawURL] = recentRead{at: now, err: err}
}
