package hub

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Fetcher fetches a source; the feed package implements it.
type Fetcher interface {
	Fetch(ctx context.Context, req FetchRequest) (*FetchResult, error)
}

// EntryReader reads the entries of a source's stored representation
// (Source.Body) as its fetch gave them, in document order; the feed
// package's fetcher implements it. A node that starts following a source
// whose baseline was taken before keeps them as its items
// (keepCurrentEntries).
type EntryReader interface {
	ReadEntries(body []byte, sourceURL string, fetchedAt time.Time) (entries []Entry, isFeed bool, err error)
}

// Scheduler decides when a source is fetched next; the feed package
// implements it from the source's hints and history.
type Scheduler interface {
	// Next returns when to fetch src again after a fetch at now that gave
	// res (nil after an error err), and a short reason naming the hint that
	// decided it.
	Next(now time.Time, src *Source, res *FetchResult, err error) (time.Time, string)
}

// FetchRequest is one conditional fetch.
type FetchRequest struct {
	URL          string
	ETag         string
	LastModified string
	// Subscribers is the number told to the origin in the User-Agent.
	Subscribers int
	// Previous is the last stored representation, for merging an RFC 3229
	// "226 IM Used" delta. When it is empty the fetcher asks for a delta
	// only if LoadPrevious is set, and reads the representation through it
	// only when a delta comes: the fetch loop holds claimed sources
	// without their bodies (up to the fetcher's body cap each), and most
	// polls are answered 304.
	Previous []byte
	// LoadPrevious reads the last stored representation (nil: none is
	// stored any more; the fetcher then asks again for the full
	// document); nil when there is none to read.
	LoadPrevious func(context.Context) ([]byte, error)
}

// FetchResult is what a fetch gave.
type FetchResult struct {
	// Status is the HTTP status of the final response (200, 226, 304).
	Status int
	// FinalURL is the URL that answered, after every redirect.
	FinalURL string
	// PermanentURL is set when the source moved permanently (301, 308, an
	// XML <redirect>): the URL to store instead of the requested one.
	PermanentURL string
	// Gone is true on HTTP 410 or an XML redirect with an empty newLocation.
	Gone bool
	// NotModified is true on 304 (nothing else is set but the validators).
	NotModified  bool
	ETag         string
	LastModified string
	ContentType  string
	// Body is the full representation (after merging a 226 delta), capped.
	Body []byte
	// Deltas is true when the origin answered this fetch with an RFC 3229
	// delta (226 IM Used, A-IM: feed), merged or not: the next fetch needs
	// this representation to merge its delta into (KeepsBody).
	Deltas   bool
	BodyHash string
	// Bytes counts what crossed the network for this fetch.
	Bytes int64
	// IsFeed reports whether Body parsed as RSS or Atom.
	IsFeed      bool
	Title       string
	Description string
	SiteURL     string
	// Entries are the feed's entries in document order, each with a stable
	// id and an Atom entry payload.
	Entries []Entry
	Hints   PollHints
	// Links are the links of the final answer's Link header fields (RFC
	// 8288) that are about the fetched resource itself, in order, their
	// targets absolute: WebSub §4 lets a publisher name its hub and self
	// URL there rather than in the body.
	Links []HeaderLink
}

// HeaderLink is one link of an HTTP Link header.
type HeaderLink struct {
	// URL is the absolute target.
	URL string
	// Rels are the relation types, lower case ("hub", "self").
	Rels []string
}

// FetchError is a failed fetch with what the origin said, if anything.
type FetchError struct {
	URL        string
	Status     int // 0 when no response came
	RetryAfter time.Time
	Err        error
}

func (e *FetchError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("fetch %s: HTTP %d: %v", e.URL, e.Status, e.Err)
	}
	return fmt.Sprintf("fetch %s: %v", e.URL, e.Err)
}

func (e *FetchError) Unwrap() error { return e.Err }

// FetchStatus returns the HTTP status of a failed fetch, or 0.
func FetchStatus(err error) int {
	var fe *FetchError
	if errors.As(err, &fe) {
		return fe.Status
	}
	return 0
}
