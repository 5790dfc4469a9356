package hub

import (
	"context"
	"errors"
	"fmt"
)

// ReadResource reports whether rawURL can be read: the check an rssCloud
// registration asks for before anything is stored (the convention of
// rssCloud servers is to read the resource first and to refuse a
// registration for one that cannot be read). A URL a node follows is
// judged by its source's state when that says enough: readable when its
// last fetch succeeded, not when it is gone or failed less than a minute
// ago (anyone may register again and again, and an origin that is failing
// is not hammered for it). Any other URL is fetched once, outside the
// fetch loop: an answer that is not a 2xx after redirects, or no answer,
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
		src, err := h.store.Source(ctx, n.SourceID)
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
