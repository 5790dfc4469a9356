package delivery

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/httpout"
)

// maxResponseBytes caps what pingd reads of a receiver's answer.
const maxResponseBytes = 64 << 10

// request and response are internal/httpout's, shared with the relay and
// upstream.
type (
	request  = httpout.Request
	response = httpout.Response
)

// do sends a request with the client and reads a capped answer; errors
// name the URL without its query (callbacks carry secrets there, as the
// verification request carries its challenge).
func do(ctx context.Context, client *http.Client, userAgent string, r request) (response, error) {
	return httpout.Do(ctx, client, userAgent, maxResponseBytes, r)
}

// verifyIntent asks a callback to confirm a (un)subscription the WebSub
// way: a GET with hub.mode, hub.topic, hub.challenge and the extra
// parameters, answered with a 2xx whose body is exactly the challenge.
func verifyIntent(ctx context.Context, client *http.Client, userAgent, callback string, params url.Values) error {
	u, err := url.Parse(callback)
	if err != nil {
		return fmt.Errorf("callback URL: %w", err)
	}
	challenge := hub.RandomID()
	q := u.Query()
	for k, vs := range params {
		q[k] = vs
	}
	q.Set("hub.challenge", challenge)
	u.RawQuery = q.Encode()
	vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := do(vctx, client, userAgent, request{Method: http.MethodGet, URL: u.String()})
	if err != nil {
		return err
	}
	if resp.Status < 200 || resp.Status > 299 {
		return fmt.Errorf("callback answered HTTP %d", resp.Status)
	}
	if strings.TrimSpace(string(resp.Body)) != challenge {
		return fmt.Errorf("callback did not echo the challenge")
	}
	return nil
}

// latestItems keeps, per item id, the newest item event of a batch, newest
// first, and lists the ids retracted after their last publication.
func latestItems(events []hub.Event) (items []hub.Event, retracted []string) {
	state := map[string]int{} // item id → index of its last event
	for i, ev := range events {
		if ev.Kind == hub.EventItem || ev.Kind == hub.EventRetract {
			state[ev.ItemID] = i
		}
	}
	for i := len(events) - 1; i >= 0; i-- {
		ev := events[i]
		if state[ev.ItemID] != i {
			continue
		}
		switch ev.Kind {
		case hub.EventItem:
			items = append(items, ev)
		case hub.EventRetract:
			retracted = append(retracted, ev.ItemID)
		}
	}
	return items, retracted
}
