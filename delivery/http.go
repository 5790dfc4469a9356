package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
)

// maxResponseBytes caps what pingd reads of a receiver's answer.
const maxResponseBytes = 64 << 10

// request is one outbound HTTP request.
type request struct {
	Method      string
	URL         string
	ContentType string
	Body        []byte
	Header      http.Header
}

// response is what came back (body capped).
type response struct {
	Status int
	Body   []byte
}

// do sends a request with the client and reads a capped answer.
func do(ctx context.Context, client *http.Client, userAgent string, r request) (response, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return response{}, fmt.Errorf("build request: %w", err)
	}
	for k, vs := range r.Header {
		req.Header[k] = vs
	}
	if r.ContentType != "" {
		req.Header.Set("Content-Type", r.ContentType)
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := client.Do(req)
	if err != nil {
		return response{}, redactURLError(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return response{Status: resp.StatusCode}, fmt.Errorf("read answer: %w", err)
	}
	return response{Status: resp.StatusCode, Body: body}, nil
}

// redactURLError keeps the query of the request URL out of a transport
// error (*url.Error names the URL): the error is logged and kept as the
// subscription's last error, and callbacks often carry secrets in their
// query, as the verification request carries its challenge.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &url.Error{Op: ue.Op, URL: redactURL(ue.URL), Err: ue.Err}
	}
	return err
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
