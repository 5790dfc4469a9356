package discovery

import (
	"fmt"
	"html/template"
	"net/url"
	"strings"

	"github.com/pingd/pingd/internal/getpingd"
	"github.com/pingd/pingd/internal/nodeurl"
)

// PublisherSnippets is what a publisher pastes so that readers find pingd:
// tags for the HTML <head> of its pages, and elements for its Atom <feed>
// or RSS <channel>. Each field is a few lines of markup, ready to paste.
type PublisherSnippets struct {
	// HTMLHead holds the <link rel="getpingd.updates.descriptor">, the
	// <meta http-equiv="X-XRDS-Location"> and the <link rel="hub"> tags.
	HTMLHead string `json:"html_head"`
	// Atom holds the descriptor and hub <link> elements for an Atom feed
	// (in the Atom namespace, the feed's default).
	Atom string `json:"atom"`
	// RSS holds, for an RSS 2.0 channel, the descriptor and hub
	// <atom:link> elements (each declaring the Atom namespace itself, so
	// the <rss> element needs no change) and the rssCloud <cloud> element.
	RSS string `json:"rss"`
}

// Snippets returns the snippets for the node whose links are given (see
// nodeurl.NodeLinks), with a <cloud> for the rssCloud REST endpoint.
func Snippets(l nodeurl.Links) (PublisherSnippets, error) {
	c, err := CloudFor(l.PleaseNotify)
	if err != nil {
		return PublisherSnippets{}, err
	}
	return SnippetsWith(l, c), nil
}

// SnippetsWith returns the snippets for the node whose links are given,
// with the <cloud> element c (a server that takes registrations over
// XML-RPC or SOAP says so there).
func SnippetsWith(l nodeurl.Links, c Cloud) PublisherSnippets {
	esc := template.HTMLEscapeString
	cloud := fmt.Sprintf(`<cloud domain="%s" port="%s" path="%s" registerProcedure="%s" protocol="%s"/>`,
		esc(c.Domain), esc(c.Port), esc(c.Path), esc(c.RegisterProcedure), esc(c.Protocol)) // escapes & < > " ' : right for XML and HTML attributes
	head := fmt.Sprintf(
		`<link rel="%s" href="%s">`+"\n"+
			`<meta http-equiv="%s" content="%s">`+"\n"+
			`<link rel="%s" href="%s">`,
		getpingd.RelDescriptor, esc(l.Descriptor),
		XRDSLocationHeader, esc(l.XRDS),
		RelHub, esc(l.Hub))
	atom := fmt.Sprintf(
		`<link rel="%s" href="%s"/>`+"\n"+
			`<link rel="%s" href="%s"/>`,
		getpingd.RelDescriptor, esc(l.Descriptor),
		RelHub, esc(l.Hub))
	rss := fmt.Sprintf(
		`<atom:link xmlns:atom="%s" rel="%s" href="%s"/>`+"\n"+
			`<atom:link xmlns:atom="%s" rel="%s" href="%s"/>`+"\n"+
			`%s`,
		NSAtom, getpingd.RelDescriptor, esc(l.Descriptor),
		NSAtom, RelHub, esc(l.Hub),
		cloud)
	return PublisherSnippets{HTMLHead: head, Atom: atom, RSS: rss}
}

// RSSCloud registration values written into <cloud>.
const (
	CloudRegisterProcedure = "rssCloud.pleaseNotify"
	CloudProtocol          = "http-post"
)

// Cloud is an rssCloud <cloud> element's attributes.
type Cloud struct {
	Domain, Port, Path, RegisterProcedure, Protocol string
}

// CloudFor returns the <cloud> attributes pointing at the rssCloud REST
// registration endpoint pleaseNotifyURL (Links.PleaseNotify).
func CloudFor(pleaseNotifyURL string) (Cloud, error) {
	u, err := url.Parse(pleaseNotifyURL)
	if err != nil || u.Hostname() == "" {
		return Cloud{}, fmt.Errorf("rssCloud endpoint %q is not an absolute URL", pleaseNotifyURL)
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	return Cloud{
		Domain:            u.Hostname(),
		Port:              port,
		Path:              u.EscapedPath(),
		RegisterProcedure: CloudRegisterProcedure,
		Protocol:          CloudProtocol,
	}, nil
}
