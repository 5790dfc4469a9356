package rsscloud

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// MaxURLs caps the URLs of one registration.
const MaxURLs = 100

// Registration is one pleaseNotify request.
type Registration struct {
	// Procedure is called on the subscriber (xml-rpc, soap).
	Procedure string
	Port      int
	Path      string
	Protocol  string
	URLs      []string
	// Domain, when set, is the callback host instead of the caller's
	// address; the callback must then echo a challenge.
	Domain string
}

// urlParamPattern matches the numbered url1…urlN fields of the REST form.
var urlParamPattern = regexp.MustCompile(`^url([1-9][0-9]{0,3})$`)

// ParsePleaseNotifyForm decodes the REST form of pleaseNotify:
// notifyProcedure (or registerProcedure), port, path, protocol,
// url1…urlN (a plain url is taken too) and the optional domain.
func ParsePleaseNotifyForm(form url.Values) (Registration, error) {
	procedure := form.Get("notifyProcedure")
	if procedure == "" {
		procedure = form.Get("registerProcedure")
	}
	type numbered struct {
		n int
		u string
	}
	var found []numbered
	for key, vs := range form {
		if key == "url" {
			for _, v := range vs {
				found = append(found, numbered{0, v})
			}
			continue
		}
		m := urlParamPattern.FindStringSubmatch(key)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		for _, v := range vs {
			found = append(found, numbered{n, v})
		}
		if len(found) > MaxURLs {
			break
		}
	}
	slices.SortStableFunc(found, func(a, b numbered) int { return a.n - b.n })
	urls := make([]string, 0, len(found))
	for _, f := range found {
		urls = append(urls, f.u)
	}
	return NewRegistration(procedure, form.Get("port"), form.Get("path"), form.Get("protocol"), urls, form.Get("domain"))
}

// NewRegistration checks the parameters of a registration, as both
// the REST form and the XML-RPC call give them.
func NewRegistration(procedure, port, path, protocol string, urls []string, domain string) (Registration, error) {
	reg := Registration{
		Procedure: strings.TrimSpace(procedure),
		Path:      strings.TrimSpace(path),
		Protocol:  strings.TrimSpace(protocol),
		Domain:    strings.TrimSpace(domain),
	}
	if !ValidProtocol(reg.Protocol) {
		return reg, fmt.Errorf("%w: protocol %q (want http-post, https-post, xml-rpc or soap)", hub.ErrInvalid, reg.Protocol)
	}
	p, err := strconv.Atoi(strings.TrimSpace(port))
	if err != nil || p < 1 || p > 65535 {
		return reg, fmt.Errorf("%w: port %q (want 1 to 65535)", hub.ErrInvalid, port)
	}
	reg.Port = p
	if err := checkPath(reg.Path); err != nil {
		return reg, err
	}
	if reg.Path == "" {
		reg.Path = "/"
	} else if !strings.HasPrefix(reg.Path, "/") {
		reg.Path = "/" + reg.Path
	}
	switch reg.Protocol {
	case XMLRPC:
		if !xmlrpc.ValidMethodName(reg.Procedure) {
			return reg, fmt.Errorf("%w: notifyProcedure %q is not an XML-RPC method name", hub.ErrInvalid, reg.Procedure)
		}
	case SOAP:
		if !ValidSOAPProcedure(reg.Procedure) {
			return reg, fmt.Errorf("%w: notifyProcedure %q is not a SOAP procedure name", hub.ErrInvalid, reg.Procedure)
		}
	default:
		reg.Procedure = "" // http-post calls no procedure
	}
	if reg.Domain != "" {
		if err := checkDomain(reg.Domain); err != nil {
			return reg, err
		}
	}
	if len(urls) == 0 {
		return reg, fmt.Errorf("%w: no URL to be notified about (url1, url2, …)", hub.ErrInvalid)
	}
	if len(urls) > MaxURLs {
		return reg, fmt.Errorf("%w: more than %d URLs in one registration", hub.ErrInvalid, MaxURLs)
	}
	seen := map[string]bool{}
	for _, u := range urls {
		u = strings.TrimSpace(u)
		if err := hub.ValidURL(u); err != nil {
			return reg, err
		}
		if !seen[u] {
			seen[u] = true
			reg.URLs = append(reg.URLs, u)
		}
	}
	return reg, nil
}

// checkPath accepts a path of printable ASCII without a fragment or
// white space (a query is allowed: some responders take one).
func checkPath(p string) error {
	if len(p) > 1024 {
		return fmt.Errorf("%w: path longer than 1024 bytes", hub.ErrInvalid)
	}
	for _, r := range p {
		if r <= ' ' || r >= 0x7f || r == '#' || r == '\\' {
			return fmt.Errorf("%w: path %q has a character it may not have (%q)", hub.ErrInvalid, p, r)
		}
	}
	return nil
}

// checkDomain accepts a host name or an IP address, nothing else.
func checkDomain(d string) error {
	if _, err := netip.ParseAddr(strings.Trim(d, "[]")); err == nil {
		return nil
	}
	if len(d) > 253 {
		return fmt.Errorf("%w: domain longer than 253 bytes", hub.ErrInvalid)
	}
	for _, label := range strings.Split(strings.TrimSuffix(d, "."), ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return fmt.Errorf("%w: domain %q is not a host name or an IP address", hub.ErrInvalid, d)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return fmt.Errorf("%w: domain %q is not a host name or an IP address", hub.ErrInvalid, d)
			}
		}
	}
	return nil
}

// Callback is the URL notifications go to: the domain when given, else
// the caller's own address (a registration cannot be made for another
// host), with the port and path.
func (reg Registration) Callback(remoteIP string) (string, error) {
	host := reg.Domain
	if host == "" {
		ip, err := netip.ParseAddr(remoteIP)
		if err != nil {
			return "", fmt.Errorf("the caller's address %q is not an IP address", remoteIP)
		}
		host = ip.Unmap().WithZone("").String()
	}
	scheme := "http"
	if reg.Protocol == HTTPSPost {
		scheme = "https"
	}
	raw := scheme + "://" + net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(reg.Port)) + reg.Path
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%w: callback %q: %v", hub.ErrInvalid, raw, err)
	}
	return u.String(), nil
}
