package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// ErrRefused is matched (errors.Is) by every *RefusedError.
var ErrRefused = errors.New("address refused")

// RefusedError says that a connection to Addr was not attempted because the
// address is not public.
type RefusedError struct {
	Addr netip.Addr
	// Kind describes the address ("a loopback address", "a private address", …).
	Kind string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refused: %s is %s", e.Addr, e.Kind)
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// guardian decides; classify only names the reason. Any port is allowed:
// feeds and callbacks live on all sorts of ports.
var guardian = ssrf.New(ssrf.WithAnyPort(), ssrf.WithNetworks("tcp4", "tcp6"))

// metadataAddrs are the cloud instance-metadata endpoints, named separately
// because they are the classic SSRF target.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
}

var (
	cgnat      = netip.MustParsePrefix("100.64.0.0/10")
	thisNet    = netip.MustParsePrefix("0.0.0.0/8")
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	benchmark  = netip.MustParsePrefix("198.18.0.0/15")
	reservedV4 = netip.MustParsePrefix("240.0.0.0/4")
)

// CheckAddr returns a *RefusedError when ip is not a public unicast
// address, nil otherwise.
func CheckAddr(ip netip.Addr) error {
	if !ip.IsValid() {
		return &RefusedError{Addr: ip, Kind: "not a valid address"}
	}
	kind := classify(ip)
	if kind == "" {
		if err := guardian.SafeAddr(ip); err != nil {
			kind = "a reserved or special-purpose address"
		}
	}
	if kind != "" {
		return &RefusedError{Addr: ip, Kind: kind}
	}
	return nil
}

// classify names the kind of a non-public address, or returns "".
func classify(ip netip.Addr) string {
	u := ip.Unmap()
	switch {
	case u.IsUnspecified() || (u.Is4() && thisNet.Contains(u)):
		return "an unspecified address"
	case u.IsLoopback():
		return "a loopback address"
	}
	for _, m := range metadataAddrs {
		if u == m {
			return "a cloud metadata address"
		}
	}
	switch {
	case u.IsLinkLocalUnicast() || u.IsLinkLocalMulticast():
		return "a link-local address"
	case u.IsPrivate():
		return "a private address"
	case u.Is4() && cgnat.Contains(u):
		return "a carrier-grade NAT address"
	case u.IsMulticast() || u.IsInterfaceLocalMulticast():
		return "a multicast address"
	case nat64.Contains(ip):
		return "a NAT64 address"
	case u.Is4() && (benchmark.Contains(u) || reservedV4.Contains(u)):
		return "a reserved or special-purpose address"
	}
	return ""
}

// Control is a net.Dialer Control function that refuses non-public
// addresses. It runs after DNS resolution, once per address tried, so a
// name that resolves to a private address is refused too.
func Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("netguard: cannot parse dial address %q: %w", address, err)
	}
	if err := CheckAddr(ap.Addr()); err != nil {
		return err
	}
	if err := guardian.Safe(network, address, nil); err != nil {
		return fmt.Errorf("netguard: %w", err)
	}
	return nil
}

// CheckHost resolves host (a name or an IP literal, without port) and
// refuses it when any of its addresses is not public. Callers use it to
// reject a URL early with a clear message; the dial-time check stays the
// authority, because DNS answers can change between the two.
func CheckHost(ctx context.Context, host string) error {
	if ip, err := netip.ParseAddr(host); err == nil {
		return CheckAddr(ip)
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", host, err)
	}
	for _, ip := range addrs {
		if err := CheckAddr(ip); err != nil {
			return fmt.Errorf("%s: %w", host, err)
		}
	}
	return nil
}

// Defaults of Options.
const (
	DefaultTimeout               = 30 * time.Second
	DefaultDialTimeout           = 10 * time.Second
	DefaultTLSHandshakeTimeout   = 10 * time.Second
	DefaultResponseHeaderTimeout = 20 * time.Second
	DefaultMaxRedirects          = 5
	DefaultMaxIdleConnsPerHost   = 4
	DefaultMaxIdleConns          = 100
)

// Options configure NewClient. Zero values take the defaults.
type Options struct {
	// AllowPrivate switches the address check off (PINGD_ALLOW_PRIVATE=1,
	// local development and tests).
	AllowPrivate bool
	// Timeout bounds a whole request including reading the body; default 30s.
	Timeout time.Duration
	// DialTimeout bounds connecting; default 10s.
	DialTimeout time.Duration
	// TLSHandshakeTimeout bounds the TLS handshake; default 10s.
	TLSHandshakeTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for the response headers after
	// the request was written; default 20s.
	ResponseHeaderTimeout time.Duration
	// MaxRedirects is how many redirects the client follows by itself;
	// default 5. Callers that handle redirects themselves set CheckRedirect.
	MaxRedirects int
	// MaxIdleConnsPerHost bounds the kept-alive connections per host; default 4.
	MaxIdleConnsPerHost int
	// MaxIdleConns bounds the kept-alive connections over all hosts;
	// default 100. A client that talks to many hosts again and again
	// (deliveries to subscribers) needs more, or every fan-out to more
	// hosts than that dials some of them anew.
	MaxIdleConns int
}

func (o *Options) defaults() {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.TLSHandshakeTimeout <= 0 {
		o.TLSHandshakeTimeout = DefaultTLSHandshakeTimeout
	}
	if o.ResponseHeaderTimeout <= 0 {
		o.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	if o.MaxRedirects <= 0 {
		o.MaxRedirects = DefaultMaxRedirects
	}
	if o.MaxIdleConnsPerHost <= 0 {
		o.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	if o.MaxIdleConns <= 0 {
		o.MaxIdleConns = DefaultMaxIdleConns
	}
}

// NewDialer returns a dialer that refuses non-public addresses unless
// allowPrivate is set.
func NewDialer(allowPrivate bool, timeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = Control
	}
	return d
}

// NewTransport returns an http.Transport that dials through the guard and
// keeps connections alive for reuse. It ignores proxy settings from the
// environment: a proxy would make the dial-time check see only the proxy.
func NewTransport(opts Options) *http.Transport {
	opts.defaults()
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            NewDialer(opts.AllowPrivate, opts.DialTimeout).DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    opts.TLSHandshakeTimeout,
		ResponseHeaderTimeout:  opts.ResponseHeaderTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxIdleConns:           opts.MaxIdleConns,
		MaxIdleConnsPerHost:    opts.MaxIdleConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 1 << 20,
	}
}

// NewClient returns an *http.Client whose every connection, including those
// for redirect targets, goes through the address check.
func NewClient(opts Options) *http.Client {
	opts.defaults()
	max := opts.MaxRedirects
	return &http.Client{
		Transport: NewTransport(opts),
		Timeout:   opts.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > max {
				return fmt.Errorf("stopped after %d redirects", max)
			}
			return nil
		},
	}
}
