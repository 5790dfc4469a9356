package hub

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
