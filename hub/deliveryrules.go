package hub

import "time"

// UsualCursor is the cursor most of the claimed subscriptions waiting for
// deliveries stand at (the lowest of those tied): the events after it are
// the ones a claim of one node reads for them all (NodeClaim), since the
// subscribers of one node usually stand together. Entries that lease a
// change's verification, and subscriptions not active, wait for no
// delivery. It reports false when no entry does.
func UsualCursor(claimed []Subscription) (int64, bool) {
	counts := map[int64]int{}
	best, bestCount := int64(0), 0
	for i := range claimed {
		sub := &claimed[i]
		if sub.Change.Claimed || sub.State != SubActive {
			continue
		}
		c := counts[sub.Cursor] + 1
		counts[sub.Cursor] = c
		if c > bestCount || (c == bestCount && sub.Cursor < best) {
			best, bestCount = sub.Cursor, c
		}
	}
	return best, bestCount > 0
}

// DeliveryWork is what a claim of deliveries at now takes of the
// subscription sub, whose node's log ends at lastSeq: the verification of
// its pending change (verify), unless a live lease on that verification
// is held; and its own work (deliver) once its retry time and its
// delivery lease have passed: a verification of intent while it is
// pending (or unsubscribing, as an earlier pingd wrote), the events after
// its cursor while it is active. Only the HTTP kinds are delivered so; a
// suspended subscription gets nothing. The store's claim queries are this
// rule written on the indexes, and its conformance suite holds them to it.
func DeliveryWork(sub Subscription, lastSeq int64, now time.Time) (verify, deliver bool) {
	if !sub.Kind.HTTP() {
		return false, false
	}
	verify = sub.Change.Pending() && !sub.Change.LeaseUntil.After(now)
	ready := !sub.NextAttemptAt.After(now) && !sub.LeaseUntil.After(now)
	switch sub.State {
	case SubPending, SubUnsubscribing:
		deliver = ready
	case SubActive:
		deliver = ready && sub.Cursor < lastSeq
	}
	return verify, deliver
}
