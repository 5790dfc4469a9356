package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Lookups bounds the outbound requests pingd makes on someone's behalf
// (a JID that names a page to subscribe to, a client address): every
// request counts, redirects and secondary documents included, against
// the key's token bucket; a look-up has a deadline; and only so many run
// at once, in all and per key. Refusals come at once, before any request
// is made, so a look-up never waits for another's turn: a caller holding
// a worker for it would otherwise hold that worker too.
//
// A look-up is begun with Begin and its context handed to whatever makes
// the requests; that code calls Spend(ctx) before each request (a
// transport does it for every hop of a redirect chain).
type Lookups struct {
	requests *Keyed
	slots    chan struct{}
	perKey   int
	timeout  time.Duration

	mu      sync.Mutex
	running map[string]int
}

// LookupLimits configures Lookups; a zero field takes its default.
type LookupLimits struct {
	// RequestsPerHour is the rate a key's budget refills at; Burst what
	// it holds when full (default: half an hour's worth, at least one).
	RequestsPerHour float64
	Burst           int
	// Concurrent bounds the look-ups running at once in the process,
	// PerKey those of one key.
	Concurrent int
	PerKey     int
	// Timeout bounds one whole look-up, every request of it together.
	Timeout time.Duration
}

// Defaults of LookupLimits. A page look-up makes a few requests (the
// page, a redirect or two, a descriptor); 120 an hour is a reader
// bringing in a dozen sites at once, not a crawler.
const (
	DefaultLookupRequestsPerHour = 120
	DefaultLookupsConcurrent     = 4
	DefaultLookupsPerKey         = 2
	DefaultLookupTimeout         = 10 * time.Second
)

// Reasons a look-up or one of its requests is refused; the error is a
// *LookupRefused wrapping one of them.
var (
	// ErrLookupBudget: the key has used its requests for now.
	ErrLookupBudget = errors.New("over the budget of outbound requests")
	// ErrLookupsBusy: as many look-ups as allowed run already (in all,
	// or for the key when KeyBusy).
	ErrLookupsBusy = errors.New("too many look-ups at once")
)

// LookupRefused says why a look-up (or a request of it) was refused, and
// when trying again may succeed.
type LookupRefused struct {
	Err error
	// KeyBusy: the key's own look-ups fill its share (ErrLookupsBusy).
	KeyBusy bool
	// RetryIn is when the budget has a token again (ErrLookupBudget).
	RetryIn time.Duration
}

func (e *LookupRefused) Error() string {
	if e.RetryIn > 0 {
		return fmt.Sprintf("%v (retry in %s)", e.Err, e.RetryIn.Round(time.Second))
	}
	return e.Err.Error()
}

func (e *LookupRefused) Unwrap() error { return e.Err }

// NewLookups returns the bounds of lim.
func NewLookups(lim LookupLimits) *Lookups {
	if lim.RequestsPerHour <= 0 {
		lim.RequestsPerHour = DefaultLookupRequestsPerHour
	}
	if lim.Burst <= 0 {
		lim.Burst = max(1, int(lim.RequestsPerHour/2))
	}
	if lim.Concurrent <= 0 {
		lim.Concurrent = DefaultLookupsConcurrent
	}
	if lim.PerKey <= 0 {
		lim.PerKey = DefaultLookupsPerKey
	}
	if lim.Timeout <= 0 {
		lim.Timeout = DefaultLookupTimeout
	}
	return &Lookups{
		requests: New(lim.RequestsPerHour/3600, lim.Burst),
		slots:    make(chan struct{}, lim.Concurrent),
		perKey:   min(lim.PerKey, lim.Concurrent),
		timeout:  lim.Timeout,
		running:  map[string]int{},
	}
}

// Lookup is one look-up begun for a key.
type Lookup struct {
	ctx     context.Context
	cancel  context.CancelFunc
	l       *Lookups
	key     string
	metered bool
	// prepaid is the token Begin took for the first request.
	prepaid atomic.Bool
	made    atomic.Int64
	ended   sync.Once
}

type lookupKey struct{}

// Begin starts a look-up for key, or refuses it at once (*LookupRefused):
// when key runs its share of look-ups already, when the process runs
// its whole share, or, when metered, when key's budget has no request
// left. The look-up's context (Context) ends after the timeout; End
// must be called when it is done.
func (l *Lookups) Begin(ctx context.Context, key string, metered bool) (*Lookup, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running[key] >= l.perKey {
		return nil, &LookupRefused{Err: ErrLookupsBusy, KeyBusy: true}
	}
	select {
	case l.slots <- struct{}{}:
	default:
		return nil, &LookupRefused{Err: ErrLookupsBusy}
	}
	if metered {
		// The check before any request: the first one's token is taken
		// now.
		if ok, wait := l.requests.Allow(key, time.Now()); !ok {
			<-l.slots
			return nil, &LookupRefused{Err: ErrLookupBudget, RetryIn: wait}
		}
	}
	l.running[key]++
	lk := &Lookup{l: l, key: key, metered: metered}
	lk.prepaid.Store(metered)
	lk.ctx, lk.cancel = context.WithTimeout(context.WithValue(ctx, lookupKey{}, lk), l.timeout)
	return lk, nil
}

// Context is the look-up's context: hand it to whatever makes its
// requests.
func (lk *Lookup) Context() context.Context { return lk.ctx }

// Requests is how many requests the look-up has made (or tried to).
func (lk *Lookup) Requests() int { return int(lk.made.Load()) }

// End releases the look-up's place; its context ends.
func (lk *Lookup) End() {
	lk.ended.Do(func() {
		lk.cancel()
		lk.l.mu.Lock()
		defer lk.l.mu.Unlock()
		if lk.l.running[lk.key]--; lk.l.running[lk.key] <= 0 {
			delete(lk.l.running, lk.key)
		}
		<-lk.l.slots
	})
}

// spend takes one request of the look-up's budget.
func (lk *Lookup) spend() error {
	lk.made.Add(1)
	if !lk.metered || lk.prepaid.CompareAndSwap(true, false) {
		return nil
	}
	if ok, wait := lk.l.requests.Allow(lk.key, time.Now()); !ok {
		return &LookupRefused{Err: ErrLookupBudget, RetryIn: wait}
	}
	return nil
}

// Spend counts one outbound request against the budget of the look-up
// ctx belongs to, or refuses it (*LookupRefused); outside a look-up it
// allows everything.
func Spend(ctx context.Context) error {
	lk, ok := ctx.Value(lookupKey{}).(*Lookup)
	if !ok {
		return nil
	}
	return lk.spend()
}
