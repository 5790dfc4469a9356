package hub

import "testing"

// TestHiddenSeenKeptIsTheFeedsWindow: the ids a fetch did not show are
// kept as many as it showed, within MinHiddenSeen and MaxHiddenSeen.
func TestHiddenSeenKeptIsTheFeedsWindow(t *testing.T) {
	for _, c := range []struct{ shown, want int }{
		{0, MinHiddenSeen}, {20, MinHiddenSeen}, {MinHiddenSeen + 1, MinHiddenSeen + 1},
		{5000, 5000}, {MaxHiddenSeen * 2, MaxHiddenSeen},
	} {
		if got := HiddenSeenKept(c.shown); got != c.want {
			t.Errorf("HiddenSeenKept(%d) = %d, want %d", c.shown, got, c.want)
		}
	}
}
