package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/netguard"
)

// outboundCheckTimeout bounds the name lookup of an early address check.
const outboundCheckTimeout = 5 * time.Second

// checkOutbound refuses, before anything is stored, a URL that pingd would
// later fetch or call back when the handler's CheckHost says its host is
// not a public address: a loopback, private, link-local or metadata address, or
// a name that resolves to one. The answer then says why at once, instead
// of a subscription that is stored and fails, or a source that is
// accepted and never fetched. pingd's own node URLs are never fetched and
// pass. A name that does not resolve (yet) passes too: the dial-time
// guard, which sees the addresses actually used, stays the authority.
// The handlers that store such URLs take the check as CheckHost in their
// config: cmd/pingd gives netguard.CheckHost unless private addresses are
// allowed; nil checks nothing early.
func (s *site) checkOutbound(ctx context.Context, what, raw string) error {
	if s.checkHost == nil {
		return nil
	}
	if _, own := s.ownNodeName(raw); own {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return nil // ValidURL reports it
	}
	ctx, cancel := context.WithTimeout(ctx, outboundCheckTimeout)
	defer cancel()
	if err := s.checkHost(ctx, u.Hostname()); errors.Is(err, netguard.ErrRefused) {
		// The kind of address, not the address: for a name it is what
		// pingd's resolver said, which strangers have no business learning.
		kind := "not a public address"
		var refused *netguard.RefusedError
		if errors.As(err, &refused) {
			kind = refused.Kind
		}
		return fmt.Errorf("%w: %s %s is refused: its host is %s; pingd fetches and calls back public addresses only", hub.ErrInvalid, what, raw, kind)
	}
	return nil
}
