package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
)

// TestXMPPBouncesShown: an XMPP subscription whose notifications bounce
// shows its count and reason in the admin API and on the status page
// (the address and the reason in the admin view only).
func TestXMPPBouncesShown(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := hub.DefaultNodeConfig()
	if _, _, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: "news", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	sub, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: "news", Kind: hub.KindXMPP, Address: "reader@example.org",
		BareJID: "reader@example.org", Options: hub.Options{Format: hub.FormatMessage}})
	if err != nil {
		t.Fatal(err)
	}
	first := e.clock.Now().Add(-3 * time.Hour)
	for i, reason := range []string{"service-unavailable", "service-unavailable: The user does not exist"} {
		if _, _, err := e.store.RecordBounce(ctx, sub.ID, reason, first.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}

	resp := e.admin(http.MethodGet, "/api/nodes/news/subscribers", nil)
	wantStatus(t, resp, http.StatusOK)
	var got struct {
		Subscribers []struct {
			Kind     string `json:"kind"`
			Format   string `json:"format"`
			Delivery struct {
				ConsecutiveErrors int       `json:"consecutive_errors"`
				FirstFailure      time.Time `json:"first_failure"`
				LastError         string    `json:"last_error"`
			} `json:"delivery"`
		} `json:"subscribers"`
	}
	if err := json.Unmarshal(readBody(t, resp), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Subscribers) != 1 || got.Subscribers[0].Format != hub.FormatMessage || got.Subscribers[0].Delivery.ConsecutiveErrors != 2 ||
		!got.Subscribers[0].Delivery.FirstFailure.Equal(first) || got.Subscribers[0].Delivery.LastError != "service-unavailable: The user does not exist" {
		t.Errorf("subscribers = %+v", got.Subscribers)
	}

	public := getStatusPage(t, e, "/")
	rows := public.rows("bouncing")
	if len(rows) != 1 || rows[0]["Node"] != "news" || rows[0]["Subscriber"] != "#"+strconv.FormatInt(sub.ID, 10) || rows[0]["Bounces in a row"] != "2" {
		t.Errorf("public bouncing rows = %v", rows)
	}
	if text := public.visibleText(); strings.Contains(text, "reader@example.org") || strings.Contains(text, "does not exist") {
		t.Errorf("the public page shows the subscriber or its error")
	}
	admin := getStatusPage(t, e, "/?admin=1", "Authorization", "Bearer "+testAdminToken)
	rows = admin.rows("bouncing")
	if len(rows) != 1 || rows[0]["Subscriber"] != "reader@example.org" || rows[0]["Last error"] != "service-unavailable: The user does not exist" {
		t.Errorf("admin bouncing rows = %v", rows)
	}
	if !strings.Contains(admin.visibleText(), "XMPP subscriptions bouncing 1") {
		t.Errorf("the queue facts do not count the bouncing subscription")
	}
}
