package hub

import "context"

// SourceResolver turns whatever URL a user hands pingd (a feed, or a page
// that links to its feeds) into the source to follow. The discovery
// package implements it; callers that have none treat every URL as the
// feed itself.
type SourceResolver interface {
	ResolveSource(ctx context.Context, rawURL string) (*ResolvedSource, error)
}

// ResolvedSource is what ResolveSource found.
type ResolvedSource struct {
	// FeedURL is the chosen source: the URL itself when it is a feed (or
	// any resource that is not an HTML page), else the best feed the page
	// links to.
	FeedURL string
	// Alternatives are the other feeds the page offers, best first.
	Alternatives []string
	// FromPage reports that FeedURL was found on an HTML page.
	FromPage bool
}
