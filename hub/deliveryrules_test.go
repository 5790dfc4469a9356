package hub_test

import (
	"testing"
	"time"

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

func TestDeliveryWork(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const lastSeq = 5
	sub := func(kind hub.Kind, state hub.SubState, cursor int64, edit ...func(*hub.Subscription)) hub.Subscription {
		s := hub.Subscription{Kind: kind, State: state}
		s.Cursor = cursor
		for _, e := range edit {
			e(&s)
		}
		return s
	}
	retryAt := func(at time.Time) func(*hub.Subscription) {
		return func(s *hub.Subscription) { s.NextAttemptAt = at }
	}
	leasedUntil := func(at time.Time) func(*hub.Subscription) {
		return func(s *hub.Subscription) { s.LeaseOwner, s.LeaseUntil = "other", at }
	}
	change := func(leaseUntil time.Time) func(*hub.Subscription) {
		return func(s *hub.Subscription) {
			s.Change = hub.SubChange{ID: "c", Mode: hub.ChangeSubscribe, LeaseUntil: leaseUntil}
		}
	}
	for _, tc := range []struct {
		name            string
		sub             hub.Subscription
		verify, deliver bool
	}{
		{"active, behind", sub(hub.KindWebhook, hub.SubActive, 4), false, true},
		{"active, caught up", sub(hub.KindWebSub, hub.SubActive, 5), false, false},
		{"pending: its verification of intent", sub(hub.KindWebSub, hub.SubPending, 5), false, true},
		{"unsubscribing", sub(hub.KindWebhook, hub.SubUnsubscribing, 5), false, true},
		{"suspended gets nothing", sub(hub.KindRSSCloud, hub.SubSuspended, 0), false, false},
		{"XMPP is not delivered so", sub(hub.KindXMPP, hub.SubActive, 0), false, false},
		{"XMPP with a change", sub(hub.KindXMPP, hub.SubActive, 0, change(time.Time{})), false, false},
		{"before its retry time", sub(hub.KindWebhook, hub.SubActive, 0, retryAt(now.Add(time.Second))), false, false},
		{"at its retry time", sub(hub.KindWebhook, hub.SubPending, 0, retryAt(now)), false, true},
		{"a live delivery lease", sub(hub.KindCNWS, hub.SubActive, 0, leasedUntil(now.Add(time.Second))), false, false},
		{"a lease that ran out", sub(hub.KindCNWS, hub.SubActive, 0, leasedUntil(now)), false, true},
		{"a change, caught up", sub(hub.KindWebhook, hub.SubActive, 5, change(time.Time{})), true, false},
		{"a change whatever the retry time and lease", sub(hub.KindWebhook, hub.SubSuspended, 0, change(time.Time{}),
			retryAt(now.Add(time.Hour)), leasedUntil(now.Add(time.Hour))), true, false},
		{"a change and deliveries", sub(hub.KindWebhook, hub.SubActive, 0, change(now)), true, true},
		{"a change under a live lease", sub(hub.KindWebhook, hub.SubActive, 0, change(now.Add(time.Second))), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			verify, deliver := hub.DeliveryWork(tc.sub, lastSeq, now)
			if verify != tc.verify || deliver != tc.deliver {
				t.Fatalf("verify %v, deliver %v; want %v, %v", verify, deliver, tc.verify, tc.deliver)
			}
		})
	}
}
