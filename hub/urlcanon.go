package hub

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// CanonicalURL checks that s is an absolute http or https URL with a host
// (ValidURL's rules) and returns its one canonical spelling, which every
// limit, lookup and stored row uses: the same resource written two ways
// must not count as two hosts, two sources or two subscriptions.
//
// The form follows RFC 3986 §6.2.2 and the http(s) scheme rules of §6.2.3:
//   - scheme and host in lower case; one trailing dot of the host dropped;
//   - an internationalised host in its ASCII (punycode, "xn--") form, the
//     form DNS resolves and HTTP sends in Host; pure ASCII hosts are only
//     lower-cased, so names with "_" that DNS serves stay valid;
//   - IPv6 literals in RFC 5952 text, an IPv4-mapped one as plain IPv4;
//   - the port without leading zeros, left out when it is the scheme's
//     default (80, 443); an empty port ("host:") is no port;
//   - percent-encoding with upper-case hex, unreserved characters
//     (ALPHA DIGIT - . _ ~) decoded, characters a URI may not hold
//     (spaces, non-ASCII, …) encoded, reserved characters left as
//     written: "%2F" and "/" are different paths;
//   - "." and ".." path segments removed, an empty path written "/";
//   - the query kept in its order (servers may care), an empty one ("?")
//     dropped; the fragment dropped (it never reaches the server).
//
// Malformed percent-encoding, a port outside 1–65535 and hosts that are
// no DNS name or IP address are refused with ErrInvalid. It is hand-written
// on net/url and golang.org/x/net/idna: the Go URL normalisers found are
// unmaintained and also rewrite what must stay (query order, trailing
// slashes).
func CanonicalURL(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("%w: empty URL", ErrInvalid)
	}
	if len(s) > MaxURLBytes {
		return "", fmt.Errorf("%w: URL longer than %d bytes", ErrInvalid, MaxURLBytes)
	}
	if !utf8.ValidString(s) {
		// It could not be written into the XML and JSON documents that
		// name it, and no server can have meant it.
		return "", fmt.Errorf("%w: URL %q is not valid UTF-8", ErrInvalid, s)
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%w: URL %q: %v", ErrInvalid, s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%w: URL %q is not http or https", ErrInvalid, s)
	}
	if u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("%w: URL %q has no host", ErrInvalid, s)
	}
	host, err := canonicalHost(u.Hostname())
	if err != nil {
		return "", fmt.Errorf("%w: URL %q: %v", ErrInvalid, s, err)
	}
	port, err := canonicalPort(u.Scheme, u.Port())
	if err != nil {
		return "", fmt.Errorf("%w: URL %q: %v", ErrInvalid, s, err)
	}
	// RawPath is the path as written whenever that differs from the
	// default encoding of the decoded Path; EscapedPath would drop it for
	// characters it dislikes, and "%2F" with it.
	rawPath := u.RawPath
	if rawPath == "" {
		rawPath = u.EscapedPath()
	}
	path, err := normalizeEscapes(rawPath, pathLiteral)
	if err != nil {
		return "", fmt.Errorf("%w: URL %q: path: %v", ErrInvalid, s, err)
	}
	path = removeDotSegments(path)
	if path == "" {
		path = "/"
	}
	query, err := normalizeEscapes(u.RawQuery, queryLiteral)
	if err != nil {
		return "", fmt.Errorf("%w: URL %q: query: %v", ErrInvalid, s, err)
	}

	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(u.Scheme)
	b.WriteString("://")
	if u.User != nil {
		b.WriteString(u.User.String())
		b.WriteByte('@')
	}
	if strings.Contains(host, ":") {
		b.WriteByte('[')
		b.WriteString(host)
		b.WriteByte(']')
	} else {
		b.WriteString(host)
	}
	if port != "" {
		b.WriteByte(':')
		b.WriteString(port)
	}
	b.WriteString(path)
	if query != "" {
		b.WriteByte('?')
		b.WriteString(query)
	}
	out := b.String()
	if len(out) > MaxURLBytes {
		return "", fmt.Errorf("%w: URL longer than %d bytes once percent-encoded", ErrInvalid, MaxURLBytes)
	}
	return out, nil
}

// HostKey is the origin a URL names, host and port ("example.org:443"),
// in canonical form: the key of every per-host limit (pings, fetches,
// deliveries). A URL that is not valid gives "".
func HostKey(raw string) string {
	c, err := CanonicalURL(raw)
	if err != nil {
		return ""
	}
	return CanonicalHostKey(c)
}

// HostName is the host a URL names, in canonical form and without its
// port, so that every port of one host counts together; "" for a URL that
// is not valid.
func HostName(raw string) string {
	host, _ := origin(raw)
	return host
}

// origin is the host name and port (the scheme's default when none is
// written) a URL names, in canonical form; "" for a URL that is not valid.
func origin(raw string) (host, port string) {
	c, err := CanonicalURL(raw)
	if err != nil {
		return "", ""
	}
	return canonicalOrigin(c)
}

// CanonicalHostKey is HostKey of a URL CanonicalURL returned, without
// canonicalising it again (a ping's rate limit has the canonical form at
// hand).
func CanonicalHostKey(canonical string) string {
	host, port := canonicalOrigin(canonical)
	if host == "" {
		return ""
	}
	return host + ":" + port
}

// canonicalOrigin is origin of a URL in canonical form.
func canonicalOrigin(c string) (host, port string) {
	u, err := url.Parse(c)
	if err != nil {
		return "", ""
	}
	port = u.Port()
	if port == "" {
		port = defaultPorts[u.Scheme]
	}
	return strings.ToLower(u.Hostname()), port
}

var defaultPorts = map[string]string{"http": "80", "https": "443"}

// idnaProfile maps (UTS #46: case, width, full stops) and checks
// internationalised host names, as browsers and net/http do.
var idnaProfile = idna.Lookup

// canonicalHost returns the host name of a URL (without brackets or port)
// in canonical form; an IPv6 literal comes back without brackets.
func canonicalHost(h string) (string, error) {
	if strings.Contains(h, ":") {
		addr, err := netip.ParseAddr(h)
		if err != nil {
			return "", fmt.Errorf("host %q is not an IP address", h)
		}
		if addr.Zone() != "" {
			// A zone names an interface of this machine: nothing pingd
			// fetches or calls back.
			return "", fmt.Errorf("host %q has an IPv6 zone", h)
		}
		return addr.Unmap().String(), nil
	}
	if !utf8.ValidString(h) {
		return "", fmt.Errorf("host %q is not valid UTF-8", h)
	}
	if !isASCII(h) || strings.Contains(strings.ToLower(h), "xn--") {
		a, err := idnaProfile.ToASCII(h)
		if err == nil {
			// The ASCII form must stand on its own: read again, it gives
			// itself (this also refuses what the profile let through).
			if again, aerr := idnaProfile.ToASCII(a); aerr != nil || again != a {
				err = fmt.Errorf("its ASCII form %q is not stable", a)
			}
		}
		if err != nil {
			return "", fmt.Errorf("host %q: %v", h, err)
		}
		h = a
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" {
		return "", fmt.Errorf("empty host")
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" {
			return "", fmt.Errorf("host %q has an empty label", h)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("host %q holds %q, which no host name does", h, c)
			}
		}
	}
	if addr, err := netip.ParseAddr(h); err == nil {
		return addr.String(), nil
	}
	return h, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// canonicalPort returns port without leading zeros, or "" when it is
// empty or the scheme's default.
func canonicalPort(scheme, port string) (string, error) {
	if port == "" {
		return "", nil
	}
	n, err := strconv.ParseUint(port, 10, 32)
	if err != nil || n == 0 || n > 65535 {
		return "", fmt.Errorf("port %q is not a TCP port", port)
	}
	p := strconv.FormatUint(n, 10)
	if p == defaultPorts[scheme] {
		return "", nil
	}
	return p, nil
}

// Which bytes stay literal in each part; every other byte is
// percent-encoded. Both take RFC 3986's unreserved characters,
// sub-delims, ":" and "@" (pchar); a path also "/", a query "/" and "?".
var pathLiteral, queryLiteral [256]bool

func init() {
	const pchar = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@"
	for _, c := range []byte(pchar + "/") {
		pathLiteral[c] = true
	}
	for _, c := range []byte(pchar + "/?") {
		queryLiteral[c] = true
	}
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

const upperHex = "0123456789ABCDEF"

// normalizeEscapes rewrites an escaped URL part: "%xx" of an unreserved
// character becomes the character, any other "%xx" gets upper-case hex,
// and a byte that may not stand literally is encoded. A "%" that does not
// start an escape is refused: no reading of it is more right than another.
func normalizeEscapes(s string, literal [256]bool) (string, error) {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) {
				return "", fmt.Errorf("malformed escape %q", s[i:])
			}
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 {
				return "", fmt.Errorf("malformed escape %q", s[i:i+3])
			}
			if v := hi<<4 | lo; isUnreserved(v) {
				b.WriteByte(v)
			} else {
				b.WriteByte('%')
				b.WriteByte(upperHex[v>>4])
				b.WriteByte(upperHex[v&15])
			}
			i += 2
		case literal[c]:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
		}
	}
	return b.String(), nil
}

// removeDotSegments is RFC 3986 §5.2.4 on an absolute (or empty) path.
func removeDotSegments(p string) string {
	if !strings.Contains(p, ".") {
		return p
	}
	segs := strings.Split(p, "/")
	out := make([]string, 0, len(segs))
	for i, seg := range segs {
		last := i == len(segs)-1
		switch seg {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			// The first element is the empty string before the leading
			// "/", which ".." never removes.
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, seg)
		}
	}
	return strings.Join(out, "/")
}
