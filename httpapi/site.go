package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/pingd/pingd/internal/nodeurl"
)

// Site is what every handler knows of pingd's HTTP side, given in each
// handler's config.
type Site struct {
	// PublicURL is the base of every URL pingd writes into documents and
	// links, e.g. "http://localhost:8080".
	PublicURL string
	Logger    *slog.Logger
	// MaxBodyBytes caps every request body; default DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// site is a Site checked and completed, with the helpers every handler
// shares; each handler embeds its own.
type site struct {
	publicURL string // without a trailing slash
	log       *slog.Logger
	maxBody   int64
	// checkHost is the early address check of the handlers that store
	// URLs pingd will call (checkOutbound); nil: none.
	checkHost func(ctx context.Context, host string) error
}

// newSite checks s for the handler named area.
func newSite(area string, s Site) (site, error) {
	u, err := url.Parse(s.PublicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return site{}, fmt.Errorf("httpapi: %s: public URL %q is not an absolute http(s) URL", area, s.PublicURL)
	}
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	maxBody := s.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}
	return site{
		publicURL: strings.TrimRight(s.PublicURL, "/"),
		log:       log.With("component", "http"),
		maxBody:   maxBody,
	}, nil
}

// limitBody caps the request body at MaxBodyBytes. It reports false, after
// answering 413 with the given writer, when the declared length is already
// too large.
func (s *site) limitBody(w http.ResponseWriter, r *http.Request, tooLarge func(msg string)) bool {
	if r.ContentLength > s.maxBody {
		tooLarge(s.tooLargeMessage())
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
	return true
}

func (s *site) tooLargeMessage() string {
	return fmt.Sprintf("request body larger than %d bytes", s.maxBody)
}

// isTooLarge reports whether err came from reading past the body cap.
func isTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// nodeURL is the public URL of a node's resource under prefix ("feeds",
// "xrds", "atom", "rss").
func (s *site) nodeURL(prefix, node string) string {
	return s.publicURL + "/" + prefix + "/" + url.PathEscape(node)
}

// ownNodeName recognises pingd's own node URLs under its public URL.
func (s *site) ownNodeName(raw string) (string, bool) {
	return nodeurl.OwnNodeName(s.publicURL, raw)
}
