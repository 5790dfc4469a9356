package hub_test

import (
	"testing"

	"github.com/pingd/pingd/hub"
)

func TestUsualCursor(t *testing.T) {
	active := func(cursor int64) hub.Subscription {
		s := hub.Subscription{State: hub.SubActive}
		s.Cursor = cursor
		return s
	}
	verifying := active(1)
	verifying.Change.Claimed = true
	pending := active(1)
	pending.State = hub.SubPending
	for _, tc := range []struct {
		name    string
		claimed []hub.Subscription
		want    int64
		ok      bool
	}{
		{"nothing claimed", nil, 0, false},
		{"one", []hub.Subscription{active(5)}, 5, true},
		{"the most common", []hub.Subscription{active(9), active(5), active(9)}, 9, true},
		{"the lowest of those tied", []hub.Subscription{active(9), active(5), active(9), active(5)}, 5, true},
		{"a change's verification waits for no delivery", []hub.Subscription{verifying, verifying, active(7)}, 7, true},
		{"nor does a pending subscription", []hub.Subscription{pending, pending, active(7)}, 7, true},
		{"none waits for a delivery", []hub.Subscription{verifying, pending}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := hub.UsualCursor(tc.claimed)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("got %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
