package delivery

import (
	"context"
	"time"

	"github.com/pingd/pingd/hub"
)

func (e *Engine) verify(ctx context.Context, sender Sender, sub *hub.Subscription, node *hub.Node) {
	start := time.Now()
	mode := "subscribe"
	if sub.State == hub.SubUnsubscribing {
		mode = "unsubscribe"
	}
	expires, err := sender.Verify(ctx, sub, node, mode)
	if ctx.Err() != nil {
		e.giveBack(ctx, sub) // cut off by shutdown: verified again by the next process
		return
	}
	log := e.log.With("node", node.Name, "kind", sub.Kind, "subscriber", redactURL(sub.Address), "mode", mode)
	switch {
	case err != nil && mode == "subscribe":
		e.observe(sub.Kind, OutcomeRefused, start)
		switch dropped, serr := e.decide(ctx, sub, false, time.Time{}); {
		case serr != nil:
			log.ErrorContext(ctx, "drop an unverified subscription", "err", serr)
		case dropped:
			log.WarnContext(ctx, "verification of intent failed; subscription dropped", "err", err)
			return
		default:
			// A newer request replaced the settings meanwhile: that one
			// is verified next.
			log.InfoContext(ctx, "verification of intent failed for a request replaced meanwhile", "err", err)
		}
		e.saveThen(ctx, sub, sub.DeliveryState, true)
	case err != nil:
		// An unsubscription left by an earlier pingd (state
		// unsubscribing); newer ones are pending changes.
		e.observe(sub.Kind, OutcomeRefused, start)
		log.WarnContext(ctx, "unsubscribe not confirmed; subscription kept", "err", err)
		e.setState(ctx, sub, hub.SubActive, sub.ExpiresAt, false)
	case mode == "unsubscribe":
		e.observe(sub.Kind, OutcomeVerified, start)
		log.InfoContext(ctx, "unsubscribed")
		e.remove(ctx, sub)
	default:
		e.observe(sub.Kind, OutcomeVerified, start)
		switch applied, serr := e.decide(ctx, sub, true, expires); {
		case serr != nil:
			log.ErrorContext(ctx, "activate a verified subscription", "err", serr)
			e.saveThen(ctx, sub, sub.DeliveryState, true)
			return
		case !applied:
			log.InfoContext(ctx, "verified a request replaced meanwhile; the newer one is verified next")
			e.saveThen(ctx, sub, sub.DeliveryState, true)
			return
		}
		log.InfoContext(ctx, "subscription verified", "expires", expires)
		// Look at the node once saved: events may have arrived while it
		// was pending.
		e.saveThen(ctx, sub, cleanRecord(sub.DeliveryState), true)
	}
}

// cleanRecord is the delivery state of a subscription whose subscriber has
// just verified a (re)subscription: errors from before a renewal must not
// suspend or age it at once, and it is served now.
func cleanRecord(ds hub.DeliveryState) hub.DeliveryState {
	ds.ConsecutiveErrors, ds.FirstFailureAt, ds.LastError, ds.NextAttemptAt = 0, time.Time{}, "", time.Time{}
	return ds
}

// decide applies (verified) or refuses the request the subscription was
// claimed with, by its Change.ID. It reports false when nothing was
// decided: a newer request replaced it meanwhile, or the subscription is
// gone. A store error is returned; the request then stays and is verified
// again.
func (e *Engine) decide(ctx context.Context, sub *hub.Subscription, verified bool, expires time.Time) (bool, error) {
	ctx, cancel := persistContext(ctx)
	defer cancel()
	if verified {
		return e.cfg.Store.ApplySubscriptionChange(ctx, sub.ID, sub.Change.ID, expires)
	}
	return e.cfg.Store.RefuseSubscriptionChange(ctx, sub.ID, sub.Change.ID)
}

// verifyChange asks the callback of a verified subscription about its
// pending change, with the settings the change asks for, and applies the
// change only if the callback confirms. A refused or unanswered change
// leaves the subscription exactly as it was (settings, lease, cursor,
// delivery record). The verification holds the change's lease only: the
// subscription's deliveries go on beside it with the settings it has.
func (e *Engine) verifyChange(ctx context.Context, sender Sender, sub *hub.Subscription, node *hub.Node) {
	start := time.Now()
	change := sub.Change
	asked := *sub
	if change.Mode == hub.ChangeSubscribe {
		asked.Options = change.Options
	}
	expires, err := sender.Verify(ctx, &asked, node, change.Mode)
	if ctx.Err() != nil {
		e.giveBack(ctx, sub) // cut off by shutdown: verified again by the next process
		return
	}
	log := e.log.With("node", node.Name, "kind", sub.Kind, "subscriber", redactURL(sub.Address), "mode", change.Mode)
	if err != nil {
		e.observe(sub.Kind, OutcomeRefused, start)
		switch dropped, serr := e.decide(ctx, sub, false, time.Time{}); {
		case serr != nil:
			log.ErrorContext(ctx, "drop an unverified change", "err", serr)
		case dropped:
			log.WarnContext(ctx, "change of a subscription not confirmed; the subscription stays as it was", "err", err)
		default:
			log.InfoContext(ctx, "a change not confirmed was replaced, or its subscription removed, meanwhile", "err", err)
		}
		return
	}
	e.observe(sub.Kind, OutcomeVerified, start)
	switch applied, serr := e.decide(ctx, sub, true, expires); {
	case serr != nil:
		log.ErrorContext(ctx, "apply a verified change", "err", serr)
	case !applied:
		log.InfoContext(ctx, "verified a change replaced, or its subscription removed, meanwhile; nothing applied")
	case change.Mode == hub.ChangeUnsubscribe:
		log.InfoContext(ctx, "unsubscribed")
	default:
		log.InfoContext(ctx, "change of a subscription verified", "expires", expires)
		// A renewal clears the backoff and resumes a suspended
		// subscription: look at the node for what it may now be sent.
		e.poke(sub.NodeID)
	}
}

// releaseChange gives back the lease of a change's verification undecided.
func (e *Engine) releaseChange(ctx context.Context, sub *hub.Subscription) {
	ctx, cancel := persistContext(ctx)
	defer cancel()
	if err := e.cfg.Store.ReleaseSubscriptionChange(ctx, sub.ID, sub.Change.ID, sub.Change.LeaseOwner); err != nil {
		e.log.ErrorContext(ctx, "release the verification of a change", "subscription", sub.ID, "err", err)
	}
}
