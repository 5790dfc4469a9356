package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/pingd/pingd/internal/ratelimit"
)

// The client's address. Every per-client limit (subscriptions, implicit
// nodes, list readers, the admin API and the status page) and every
// address pingd records (ping origins, the rssCloud callback host) is the
// client's, and behind a reverse proxy the TCP peer is the proxy: all
// clients would share one bucket, and one scraper would lock out everyone.
// So when the peer is one of RouterConfig.TrustedProxies, the client is read
// from the forwarding headers the proxy wrote (Forwarded, RFC 7239, or
// X-Forwarded-For). Those headers are lists a client can start itself, so
// they are read from the right: hops that are trusted proxies are passed
// over, and the first one that is not is the client. Whatever a client
// prepends stays to the left of the address its proxy appended and is
// never reached. Headers that cannot be read give the peer's address, as
// does a request carrying both headers naming different clients (the
// proxy wrote one of them, the client the other, and pingd cannot tell
// which): such requests share the proxy's bucket and never anyone else's.
//
// Buckets are per address for IPv4 and per /64 for IPv6, since one IPv6
// host commonly holds a whole /64 (clientKey).

// ParseTrustedProxies reads a comma- or space-separated list of addresses
// and CIDR prefixes ("10.0.0.0/8, 127.0.0.1, ::1"); an empty list trusts no
// proxy.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, fmt.Errorf("%q is not an address or a CIDR prefix like 10.0.0.0/8", f)
			}
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			out = append(out, p.Masked())
			continue
		}
		addr, err := netip.ParseAddr(f)
		if err != nil || addr.Zone() != "" {
			return nil, fmt.Errorf("%q is not an address or a CIDR prefix like 10.0.0.0/8", f)
		}
		addr = addr.Unmap()
		out = append(out, netip.PrefixFrom(addr, addr.BitLen()))
	}
	return out, nil
}

// clientKey is the request's client as its rate-limit buckets know it.
func clientKey(r *http.Request) string { return ratelimit.ClientKey(clientIP(r)) }

// clientAddrKey marks a request's context with its client address.
type clientAddrKey struct{}

// clientIP is the client's address: the one Router.ServeHTTP found (see
// resolveClient), or the peer's for a request that did not pass there.
func clientIP(r *http.Request) string {
	if ip, ok := r.Context().Value(clientAddrKey{}).(string); ok {
		return ip
	}
	return peerIP(r)
}

// clientResolver finds a request's client: the TCP peer, or the client a
// trusted proxy's forwarding headers name.
type clientResolver struct {
	proxies []netip.Prefix
}

// withClient returns r with its client address in the context.
func (a *clientResolver) withClient(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), clientAddrKey{}, a.resolveClient(r)))
}

// peerIP is the address of the TCP peer, IPv4-mapped IPv6 written as IPv4.
func peerIP(r *http.Request) string {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return ap.Addr().WithZone("").Unmap().String()
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		return addr.WithZone("").Unmap().String()
	}
	return host
}

// resolveClient finds the client's address: the peer's, unless the peer is
// a trusted proxy and its forwarding headers name another.
func (a *clientResolver) resolveClient(r *http.Request) string {
	peer := peerIP(r)
	if len(a.proxies) == 0 {
		return peer
	}
	peerAddr, err := netip.ParseAddr(peer)
	if err != nil || !a.trusted(peerAddr) {
		return peer
	}
	fwd, xff := r.Header.Values("Forwarded"), r.Header.Values("X-Forwarded-For")
	var fromFwd, fromXFF netip.Addr
	if len(fwd) > 0 {
		hops, err := forwardedFor(strings.Join(fwd, ","))
		if err != nil {
			return peer
		}
		if fromFwd, err = a.firstUntrusted(hops); err != nil {
			return peer
		}
	}
	if len(xff) > 0 {
		hops := strings.Split(strings.Join(xff, ","), ",")
		if fromXFF, err = a.firstUntrusted(hops); err != nil {
			return peer
		}
	}
	switch {
	case fromFwd.IsValid() && fromXFF.IsValid() && fromFwd != fromXFF:
		return peer
	case fromFwd.IsValid():
		return fromFwd.String()
	case fromXFF.IsValid():
		return fromXFF.String()
	}
	return peer
}

func (a *clientResolver) trusted(addr netip.Addr) bool {
	for _, p := range a.proxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

var errNoClient = errors.New("no client address in the forwarding header")

// firstUntrusted walks the hops of a forwarding header from the right and
// returns the first that is not a trusted proxy; when every hop is one,
// the leftmost. A hop it cannot read before that is an error.
func (a *clientResolver) firstUntrusted(hops []string) (netip.Addr, error) {
	var last netip.Addr
	for i := len(hops) - 1; i >= 0; i-- {
		addr, ok := parseHop(hops[i])
		if !ok {
			return netip.Addr{}, errNoClient
		}
		if !a.trusted(addr) {
			return addr, nil
		}
		last = addr
	}
	if !last.IsValid() {
		return netip.Addr{}, errNoClient
	}
	return last, nil
}

// parseHop reads one hop of X-Forwarded-For or one for= value of
// Forwarded: an address, possibly with a port ("192.0.2.1:4711"), an IPv6
// address possibly in brackets ("[2001:db8::1]", "[2001:db8::1]:4711").
// "unknown" and obfuscated identifiers ("_hidden") are not addresses.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return netip.Addr{}, false
	}
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		if rest := s[end+1:]; rest != "" && !validPort(rest) {
			return netip.Addr{}, false
		}
		addr, err := netip.ParseAddr(s[1:end])
		if err != nil || !addr.Is6() {
			return netip.Addr{}, false
		}
		return addr.WithZone("").Unmap(), true
	}
	if addr, err := netip.ParseAddr(s); err == nil {
		return addr.WithZone("").Unmap(), true
	}
	// IPv4 with a port.
	host, port, ok := strings.Cut(s, ":")
	if !ok || !validPort(":"+port) {
		return netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || !addr.Is4() {
		return netip.Addr{}, false
	}
	return addr, true
}

// validPort reports whether s is ":" and a port number.
func validPort(s string) bool {
	if len(s) < 2 || len(s) > 6 || s[0] != ':' {
		return false
	}
	for _, c := range s[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// forwardedFor reads the for= value of every element of a Forwarded
// header (RFC 7239: elements separated by commas, pairs by semicolons,
// values tokens or quoted strings), left to right. An element without
// for= gives an empty hop, which parseHop refuses. Values are taken a
// little more leniently than the grammar, so that an unquoted IPv6
// address, as a proxy configured with for=$remote_addr writes it, reads.
func forwardedFor(h string) ([]string, error) {
	var hops []string
	i := 0
	skipSpace := func() {
		for i < len(h) && (h[i] == ' ' || h[i] == '\t') {
			i++
		}
	}
	for {
		var forValue string
		pairs := 0
		for {
			skipSpace()
			start := i
			for i < len(h) && isTokenChar(h[i]) {
				i++
			}
			name := h[start:i]
			skipSpace()
			if name == "" {
				if i == len(h) || h[i] == ',' {
					break // an empty element, as lists allow
				}
				return nil, errors.New("forwarded: want a parameter name")
			}
			if i >= len(h) || h[i] != '=' {
				return nil, errors.New("forwarded: want name=value")
			}
			i++
			skipSpace()
			var value string
			if i < len(h) && h[i] == '"' {
				i++
				var b strings.Builder
				closed := false
				for i < len(h) {
					c := h[i]
					i++
					if c == '\\' && i < len(h) {
						b.WriteByte(h[i])
						i++
						continue
					}
					if c == '"' {
						closed = true
						break
					}
					b.WriteByte(c)
				}
				if !closed {
					return nil, errors.New("forwarded: unterminated quoted string")
				}
				value = b.String()
			} else {
				start := i
				for i < len(h) && h[i] != ';' && h[i] != ',' && h[i] != ' ' && h[i] != '\t' && h[i] != '"' {
					i++
				}
				value = h[start:i]
				if value == "" {
					return nil, errors.New("forwarded: empty value")
				}
			}
			pairs++
			if strings.EqualFold(name, "for") {
				if forValue != "" {
					return nil, errors.New("forwarded: for= given twice in one element")
				}
				forValue = value
			}
			skipSpace()
			if i < len(h) && h[i] == ';' {
				i++
				continue
			}
			break
		}
		if pairs > 0 {
			hops = append(hops, forValue)
		}
		if i >= len(h) {
			return hops, nil
		}
		if h[i] != ',' {
			return nil, errors.New("forwarded: want ',' or ';' between parameters")
		}
		i++
	}
}

// isTokenChar reports whether c may appear in an HTTP token (RFC 9110).
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
