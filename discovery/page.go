package discovery

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"html/template"
	"slices"
	"time"

	"github.com/pingd/pingd/internal/getpingd"
)

// PageEntries caps the entries the descriptor page lists.
const PageEntries = 10

// Page is what the descriptor page shows besides the descriptor itself.
type Page struct {
	// Title names the node for people; empty means the node name.
	Title string
	// XRDSURL is the node's XRDS document; AtomURL and RSSURL its feeds.
	XRDSURL, AtomURL, RSSURL string
	// Entries are the node's recent entries, newest first; the page shows
	// the first PageEntries, and none on a whitelist node (its page is
	// public, its content is not).
	Entries []PageEntry
}

// PageEntry is one entry as the page lists it.
type PageEntry struct {
	Title, Link string
	Updated     time.Time
}

// DescriptorPage renders the HTML page served at the descriptor URL for
// browsers and for clients that discover by the X-XRDS-Location <meta> tag
// or the getpingd.updates.descriptor <link>. It is the page a reader
// shares: the node's recent entries, then the ways to follow it in the
// order they work in common clients (the chat command with the xmpp:
// roster and message URIs and the QR code, then the XEP-0060 subscribe
// URI, then the node's feeds), then the GetPingd requests for programs.
func DescriptorPage(d Descriptor, p Page) []byte {
	title := p.Title
	if title == "" {
		title = d.Node
	}
	messageURI, rosterURI := d.MessageURI(), d.RosterURI()
	// A QR code holds up to 2,331 bytes at level M: every node name fits
	// (255 bytes, 765 escaped). Without one the links still serve.
	qrCode, qrErr := QRSVG(messageURI, "QR code of "+messageURI)
	whitelist := d.Security == getpingd.SecurityWhitelist
	var entries []pageEntry
	if !whitelist {
		for _, e := range newestFirst(p.Entries)[:min(len(p.Entries), PageEntries)] {
			pe := pageEntry{Title: e.Title, Link: e.Link}
			if pe.Title == "" {
				pe.Title = "(untitled)"
			}
			if !e.Updated.IsZero() {
				u := e.Updated.UTC()
				pe.Date, pe.DateTime = u.Format("2 January 2006, 15:04 UTC"), u.Format(time.RFC3339)
			}
			entries = append(entries, pe)
		}
	}
	var buf bytes.Buffer
	err := pageTemplate.Execute(&buf, pageData{
		Descriptor:       d,
		CSS:              template.CSS(pageCSS),
		Entries:          entries,
		SubscribeURI:     template.URL(d.SubscribeURI()),
		MessageURI:       template.URL(messageURI),
		RosterURI:        template.URL(rosterURI),
		MessageURIText:   messageURI,
		RosterURIText:    rosterURI,
		ChatCommand:      d.ChatCommand(),
		QRCode:           qrCode,
		HasQRCode:        qrErr == nil,
		Title:            title,
		XRDSURL:          p.XRDSURL,
		AtomURL:          p.AtomURL,
		RSSURL:           p.RSSURL,
		PostURL:          d.PostURL(),
		Whitelist:        whitelist,
		HTTPType:         getpingd.ContentTypeHTTPSubscribe,
		XMPPType:         getpingd.ContentTypeXMPPSubscribe,
		DiffType:         getpingd.DiffPatchOps,
		XRDSType:         ContentTypeXRDS,
		XRDSHeader:       XRDSLocationHeader,
		RelDescriptor:    getpingd.RelDescriptor,
		MethodSubscribe:  getpingd.MethodSubscribe,
		ServiceSubscribe: getpingd.ServiceSubscribe,
	})
	if err != nil {
		// The template is fixed and its data are plain strings: only a
		// programming error gets here, and the tests execute it.
		return []byte("<!DOCTYPE html><title>error</title><p>descriptor page failed: " + template.HTMLEscapeString(err.Error()))
	}
	return buf.Bytes()
}

// newestFirst orders entries by their dates, newest first, when every one
// has a date: a feed's first fetch stores its entries in the feed's order,
// which is not always by date. Otherwise the given order (newest
// publication first) stands.
func newestFirst(entries []PageEntry) []PageEntry {
	for _, e := range entries {
		if e.Updated.IsZero() {
			return entries
		}
	}
	out := slices.Clone(entries)
	slices.SortStableFunc(out, func(a, b PageEntry) int { return b.Updated.Compare(a.Updated) })
	return out
}

//go:embed templates/descriptor.html templates/descriptor.css
var pageFiles embed.FS

var (
	// pageCSS goes verbatim into the page's <style> element, which
	// DescriptorPageCSP allows by the hash of exactly that content.
	pageCSS = mustRead("templates/descriptor.css")
	// html/template escapes every value for its context (attribute, URL,
	// text), so node names, entry titles and links cannot break out of
	// the markup; a link of another scheme than http(s) or mailto
	// becomes "#ZgotmplZ".
	pageTemplate = template.Must(template.New("descriptor").Parse(mustRead("templates/descriptor.html")))
)

// DescriptorPageCSP is the Content-Security-Policy the descriptor page is
// served with: the page has no script, image or form and one style
// element, allowed by its hash (its QR code is an inline SVG element drawn
// with presentation attributes, which loads nothing); nothing else is
// allowed, and no other site may frame it.
var DescriptorPageCSP = "default-src 'none'; style-src " + cspHash(pageCSS) + "; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func mustRead(name string) string {
	b, err := pageFiles.ReadFile(name)
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	return string(b)
}

// cspHash is the CSP source expression allowing an inline element whose
// content is s.
func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

type pageData struct {
	Descriptor
	CSS     template.CSS
	Entries []pageEntry
	// SubscribeURI, MessageURI and RosterURI are xmpp: URIs built and
	// escaped by xmppuri.go; html/template would refuse the scheme
	// otherwise.
	SubscribeURI, MessageURI, RosterURI        template.URL
	MessageURIText, RosterURIText, ChatCommand string
	// QRCode is the SVG element QRSVG made of MessageURI.
	QRCode                                     template.HTML
	HasQRCode                                  bool
	Title, XRDSURL, AtomURL, RSSURL, PostURL   string
	Whitelist                                  bool
	HTTPType, XMPPType, DiffType, XRDSType     string
	XRDSHeader, RelDescriptor, MethodSubscribe string
	ServiceSubscribe                           string
}

type pageEntry struct {
	Title, Date, DateTime string
	// Link is checked by html/template for its scheme.
	Link string
}
