package component

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/netguard"
)

// Readers are told in a short sentence why pingd could not read a URL
// they named: what went wrong, for the host or the URL, named once. The
// raw error stays in the log: Go's wording names the server's own
// resolver ("lookup x on 10.0.0.53:53"), repeats the URL and means
// nothing to most readers.

// httpStatusError is an error that carries the HTTP status a server
// answered (discovery's look-ups).
type httpStatusError interface{ HTTPStatus() int }

// noFeedError is an error saying a page links to no feed.
type noFeedError interface{ NoFeed() bool }

// readErrorAnswer says why pingd could not read target (a URL a reader
// named) in words.
func readErrorAnswer(target string, err error) string {
	host := hostOf(target)
	var status httpStatusError
	var noFeed noFeedError
	switch {
	case errors.As(err, &noFeed) && noFeed.NoFeed():
		return fmt.Sprintf("pingd could not find a feed at %s: the page links to no RSS or Atom feed. Send the feed's own URL instead.", target)
	case errors.As(err, &status):
		code := status.HTTPStatus()
		text := strconv.Itoa(code)
		if t := http.StatusText(code); t != "" {
			text += " " + t
		}
		return fmt.Sprintf("pingd could not read %s: the site answered %s.", target, text)
	}
	if why := reachError(err); why != "" {
		return fmt.Sprintf("pingd could not reach %s: %s.", host, why)
	}
	return fmt.Sprintf("pingd could not find a feed at %s.", target)
}

// reachError names, in a few words, why a connection failed; "" when err
// is no connection failure it knows.
func reachError(err error) string {
	var refused *netguard.RefusedError
	var dns *net.DNSError
	var hostname x509.HostnameError
	var unknownAuthority x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	var netErr net.Error
	switch {
	case errors.As(err, &refused):
		return fmt.Sprintf("it is %s, and pingd fetches public addresses only", refused.Kind)
	case errors.As(err, &dns):
		switch {
		case dns.IsNotFound:
			return "no such host"
		case dns.IsTimeout:
			return "its name could not be looked up in time"
		default:
			return "its name could not be looked up"
		}
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the connection was refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "the connection was reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "there is no route to it"
	case errors.As(err, &hostname), errors.As(err, &unknownAuthority), errors.As(err, &invalid), errors.As(err, &verify):
		return "its TLS certificate is not valid"
	case errors.As(err, &record):
		return "it does not speak HTTPS on that port"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return "it did not answer in time"
	case strings.Contains(err.Error(), "stopped after") && strings.Contains(err.Error(), "redirects"):
		return "it redirected too many times"
	}
	return ""
}

// invalidURLAnswer says why a URL cannot be followed, naming it once.
func invalidURLAnswer(u string, err error) string {
	var refused *netguard.RefusedError
	switch {
	case errors.As(err, &refused):
		// Not the address: for a name it is what pingd's resolver said,
		// an internal address the reader has no business learning.
		return fmt.Sprintf("pingd cannot follow %s: its host is %s, and pingd fetches public addresses only.", u, refused.Kind)
	case errors.Is(err, hub.ErrExists):
		return fmt.Sprintf("pingd cannot follow %s: the node names for it are taken by other nodes.", u)
	}
	if why := reachError(err); why != "" {
		return fmt.Sprintf("pingd cannot follow %s: %s.", u, why)
	}
	msg := invalidText(err)
	// The hub's wording names the URL ("URL \"…\" is not http or
	// https"): the answer names it once, first.
	msg = strings.ReplaceAll(msg, "URL "+strconv.Quote(u), "it")
	msg = strings.ReplaceAll(msg, strconv.Quote(u), "it")
	msg = strings.ReplaceAll(msg, u, "it")
	return fmt.Sprintf("pingd cannot follow %s: %s.", u, msg)
}

// hostOf is the host of a URL (with its port when it has one), or the
// URL when it has none.
func hostOf(target string) string {
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		return u.Host
	}
	return target
}

// invalidText is a hub refusal's text without the sentinel's prefix
// ("invalid: "), for an owner's command answer.
func invalidText(err error) string {
	msg := err.Error()
	for _, sentinel := range []error{hub.ErrInvalid, hub.ErrLimit} {
		msg = strings.TrimPrefix(msg, sentinel.Error()+": ")
	}
	return strings.TrimSuffix(msg, ".")
}
