package websub

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/pingd/pingd/hub"
)

// ParamSigAlgo is an extension parameter: the X-Hub-Signature method a
// subscriber wants (sha1, sha256, sha384, sha512); sha256 without it. The
// Recommendation lets the hub choose; this lets older subscribers that
// verify only sha1 ask for it.
const ParamSigAlgo = "pingd.signature_algorithm"

// MaxPublishURLs caps the topics of one publish request.
const MaxPublishURLs = 100

// Request is a decoded hub request.
type Request struct {
	// Mode is subscribe, unsubscribe or publish.
	Mode string
	// Callback and Topic name a (un)subscription.
	Callback string
	Topic    string
	// LeaseSeconds is the lease asked for (0: none).
	LeaseSeconds int
	Secret       string
	SigAlgo      string
	// URLs are the topics of a publish request (hub.url and hub.topic,
	// each repeatable).
	URLs []string
}

// ParseRequest decodes a hub request's form. Parameters it does not
// know are ignored, as §5.1 requires.
func ParseRequest(form url.Values) (Request, error) {
	req := Request{Mode: strings.TrimSpace(form.Get("hub.mode"))}
	switch req.Mode {
	case ModePublish:
		seen := map[string]bool{}
		for _, key := range []string{"hub.url", "hub.topic"} {
			for _, u := range form[key] {
				u = strings.TrimSpace(u)
				if u == "" || seen[u] {
					continue
				}
				if err := hub.ValidURL(u); err != nil {
					return req, fmt.Errorf("%s: %w", key, err)
				}
				seen[u] = true
				req.URLs = append(req.URLs, u)
			}
		}
		if len(req.URLs) == 0 {
			return req, fmt.Errorf("%w: publish needs hub.url or hub.topic", hub.ErrInvalid)
		}
		if len(req.URLs) > MaxPublishURLs {
			return req, fmt.Errorf("%w: more than %d topics in one publish request", hub.ErrInvalid, MaxPublishURLs)
		}
		return req, nil
	case ModeSubscribe, ModeUnsubscribe:
	case "":
		return req, fmt.Errorf("%w: hub.mode is missing", hub.ErrInvalid)
	default:
		return req, fmt.Errorf("%w: hub.mode %q (want subscribe, unsubscribe or publish)", hub.ErrInvalid, req.Mode)
	}
	for _, p := range []string{"hub.callback", "hub.topic", "hub.secret", "hub.lease_seconds", ParamSigAlgo} {
		if len(form[p]) > 1 {
			return req, fmt.Errorf("%w: %s given more than once", hub.ErrInvalid, p)
		}
	}
	req.Callback = strings.TrimSpace(form.Get("hub.callback"))
	if err := hub.ValidURL(req.Callback); err != nil {
		return req, fmt.Errorf("hub.callback: %w", err)
	}
	if u, _ := url.Parse(req.Callback); u != nil && u.Fragment != "" {
		return req, fmt.Errorf("%w: hub.callback has a fragment", hub.ErrInvalid)
	}
	req.Topic = strings.TrimSpace(form.Get("hub.topic"))
	if err := hub.ValidURL(req.Topic); err != nil {
		return req, fmt.Errorf("hub.topic: %w", err)
	}
	if req.Mode == ModeUnsubscribe {
		return req, nil
	}
	if s := strings.TrimSpace(form.Get("hub.lease_seconds")); s != "" {
		n, err := strconv.Atoi(s)
		if errors.Is(err, strconv.ErrRange) && n > 0 {
			err = nil // more than any lease: the maximum is what it gets
		}
		if err != nil || n < 0 {
			return req, fmt.Errorf("%w: hub.lease_seconds %q is not a positive integer", hub.ErrInvalid, s)
		}
		req.LeaseSeconds = n
	}
	req.Secret = form.Get("hub.secret")
	if len(req.Secret) > MaxSecretBytes {
		return req, fmt.Errorf("%w: hub.secret must be less than 200 bytes", hub.ErrInvalid)
	}
	req.SigAlgo = strings.ToLower(strings.TrimSpace(form.Get(ParamSigAlgo)))
	if !ValidSigAlgo(req.SigAlgo) {
		return req, fmt.Errorf("%w: %s %q (want sha1, sha256, sha384 or sha512)", hub.ErrInvalid, ParamSigAlgo, req.SigAlgo)
	}
	return req, nil
}
