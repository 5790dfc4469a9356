package httpout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// ErrRequest marks an error building the request (a malformed URL or
// method): retrying it cannot help, unlike a transport or read error.
var ErrRequest = errors.New("build request")

// Request is one outbound HTTP request.
type Request struct {
	Method      string
	URL         string
	ContentType string // set when not empty
	Body        []byte
	Header      http.Header
}

// Response is what came back, the body cut at Do's limit.
type Response struct {
	Status int
	Body   []byte
}

// Do sends r through client, with userAgent when it is not empty, and
// reads at most maxBody bytes of the answer. A read error is returned with
// the status, which was received. URLs in errors are redacted.
func Do(ctx context.Context, client *http.Client, userAgent string, maxBody int64, r Request) (Response, error) {
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, body)
	if err != nil {
		return Response{}, fmt.Errorf("%w: %w", ErrRequest, RedactError(err))
	}
	for k, vs := range r.Header {
		req.Header[k] = vs
	}
	if r.ContentType != "" {
		req.Header.Set("Content-Type", r.ContentType)
	}
	if userAgent != "" {
		req.Header.Set("User-Agent", userAgent)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Response{}, RedactError(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return Response{Status: resp.StatusCode}, fmt.Errorf("read answer: %w", RedactError(err))
	}
	return Response{Status: resp.StatusCode, Body: b}, nil
}

// RedactError keeps the query and user info of the URL a *url.Error names
// out of err, wherever it is in the chain.
func RedactError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &url.Error{Op: ue.Op, URL: RedactURL(ue.URL), Err: ue.Err}
	}
	return err
}

// RedactURL drops the query and user info of a URL, for logs and stored
// errors: receivers often put secrets there.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable URL>"
	}
	u.User = nil
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	return u.String()
}
