package component

import (
	"context"
	"errors"
	"fmt"
	"time"

	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"

	"github.com/pingd/pingd/internal/ratelimit"
)

// Each user's share of the request side. Everything a client sends is
// taken off the stream by one reader, so what one user sends must never
// make the reader wait (pool.go) nor take more than that user's share of
// the workers:
//   - requests per second: IQ gets and sets, chat commands, presence
//     requests and errors answering notifications (each a store write) of
//     one bare JID take tokens of one bucket (Config.IQRate,
//     Config.IQBurst); beyond it an IQ is refused with resource-constraint
//     (type wait), a chat command gets a "busy" answer, a presence or an
//     error nothing;
//   - requests pending: at most Config.PendingPerSender per bare JID, and
//     maxPendingRequests in all (pool.go), refused the same way;
//   - page look-ups: the HTTP requests pingd makes to find the feed of a
//     page a user names (targets.go) are counted per JID, every request
//     (redirects and descriptors included) against a budget checked before
//     the first (Config.LookupRequestsPerHour), run at most
//     ratelimit.DefaultLookupsConcurrent at once (two per JID) and end
//     after Config.LookupTimeout.
//
// The "busy" chat answers are themselves limited (one per JID per
// busyNoteEvery), so a flood of commands cannot be turned into a flood of
// answers to someone else. PINGD_ADMINS are held to none of the per-JID
// bounds but the look-ups' concurrency and deadline.

// Defaults of the per-JID request rate.
const (
	DefaultIQRate  = 20
	DefaultIQBurst = 50
	// busyNoteEvery spaces the "busy" chat answers to one JID.
	busyNoteEvery = 10 * time.Second
)

// busyAnswer is the chat answer to a command refused for its sender's
// share.
const busyAnswer = "pingd is busy with your earlier requests; try again later."

// sharedLimits holds a service's per-JID bounds.
type sharedLimits struct {
	perSender int
	// requests is nil when the rate is unlimited.
	requests  *ratelimit.Keyed
	busyNotes *ratelimit.Keyed
	lookups   *ratelimit.Lookups
}

// newSharedLimits reads the bounds of cfg; zero fields take defaults, a
// negative IQRate turns the per-JID rate off.
func newSharedLimits(cfg Config) (sharedLimits, error) {
	if cfg.PendingPerSender < 0 || cfg.IQBurst < 0 || cfg.LookupRequestsPerHour < 0 || cfg.LookupTimeout < 0 {
		return sharedLimits{}, errors.New("component: a per-JID bound is negative")
	}
	l := sharedLimits{
		perSender: max(cfg.PendingPerSender, 0),
		busyNotes: ratelimit.New(1/busyNoteEvery.Seconds(), 1),
		lookups: ratelimit.NewLookups(ratelimit.LookupLimits{
			RequestsPerHour: cfg.LookupRequestsPerHour,
			Timeout:         cfg.LookupTimeout,
		}),
	}
	if cfg.IQRate >= 0 {
		rate, burst := cfg.IQRate, cfg.IQBurst
		if rate == 0 {
			rate = DefaultIQRate
		}
		if burst == 0 {
			burst = max(DefaultIQBurst, int(rate))
		}
		l.requests = ratelimit.New(rate, burst)
	}
	return l, nil
}

// boundsOf says which pool bounds the requests of bare are held to.
func (svc *service) boundsOf(bare string) jobBounds {
	if svc.hub.IsAdmin(bare) {
		return boundPool
	}
	return boundShare
}

// admitRequest takes a token of bare's request bucket; false when there
// is none left.
func (svc *service) admitRequest(ctx context.Context, bare string) bool {
	if svc.limits.requests == nil || svc.hub.IsAdmin(bare) {
		return true
	}
	if ok, _ := svc.limits.requests.Allow(bare, time.Now()); ok {
		return true
	}
	svc.log.DebugContext(ctx, "request refused: per-JID rate", "jid", bare)
	return false
}

// refusal is the IQ error for a request refused for its share.
func refusal(err error) *stanzaError {
	text := "too many requests from you at once; try again later"
	if errors.Is(err, errPoolFull) || errors.Is(err, errPoolClosed) {
		text = "the service is busy; try again later"
	}
	return newError(stanza.Wait, stanza.ResourceConstraint, "", text)
}

// errTooFast is a refusal by the per-JID rate.
var errTooFast = errors.New("the sender's request rate is spent")

// answerBusy tells the sender of a refused chat command to try again
// later, at most once per busyNoteEvery; the other refusals go
// unanswered.
func (svc *service) answerBusy(ctx context.Context, cn *connection, msg *element, from jid.JID, why error) {
	bare := from.Bare().String()
	svc.log.InfoContext(ctx, "chat command refused", "jid", bare, "reason", why.Error())
	if ok, _ := svc.limits.busyNotes.Allow(bare, time.Now()); !ok {
		return
	}
	var b xmlBuf
	b.open("message", "type", "chat", "id", svc.stanzaIDs.next(), "from", svc.replyFrom(msg), "to", from.String())
	b.element("body", busyAnswer)
	b.close("message")
	svc.send(ctx, cn, b.Bytes())
}

// lookupRefusedAnswer says, for people, why a page look-up was refused.
func lookupRefusedAnswer(target string, r *ratelimit.LookupRefused) string {
	switch {
	case errors.Is(r, ratelimit.ErrLookupBudget):
		return fmt.Sprintf("pingd did not look at %s: you have had it look at many pages recently. Try again %s, "+
			"or subscribe to the feed's own URL, which needs no look-up.", target, retryIn(r.RetryIn))
	case r.KeyBusy:
		return fmt.Sprintf("pingd did not look at %s: it is still looking at other pages for you. "+
			"Try again when those are answered.", target)
	default:
		return fmt.Sprintf("pingd did not look at %s: it is busy looking at pages for others. Try again in a minute.", target)
	}
}
