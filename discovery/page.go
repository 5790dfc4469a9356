package discovery

import (
	"bytes"
	"html/template"

	"github.com/pingd/pingd/internal/getpingd"
)

// DescriptorPage renders the HTML page served at the descriptor URL for
// browsers and for clients that discover by the X-XRDS-Location <meta> tag
// or the getpingd.updates.descriptor <link>. It explains in words how to
// subscribe: first for people with any Jabber client (the chat command,
// the xmpp: message URI with its QR code as inline SVG, the XEP-0060
// subscribe URI), then the GetPingd requests. title names the node for
// people; empty means the node name.
func DescriptorPage(d Descriptor, title, xrdsURL string) []byte {
	if title == "" {
		title = d.Node
	}
	messageURI := d.MessageURI()
	// A QR code holds up to 2,331 bytes at level M: every node name fits
	// (255 bytes, 765 escaped). Without one the links still serve.
	qrCode, qrErr := QRSVG(messageURI, "QR code of "+messageURI)
	var buf bytes.Buffer
	err := pageTemplate.Execute(&buf, pageData{
		Descriptor:       d,
		SubscribeURI:     template.URL(d.SubscribeURI()),
		MessageURI:       template.URL(messageURI),
		MessageURIText:   messageURI,
		ChatCommand:      d.ChatCommand(),
		QRCode:           qrCode,
		HasQRCode:        qrErr == nil,
		Title:            title,
		XRDSURL:          xrdsURL,
		PostURL:          d.PostURL(),
		Whitelist:        d.Security == getpingd.SecurityWhitelist,
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

// DescriptorPageCSP is the Content-Security-Policy the descriptor page is
// served with: the page has no style sheet, script, image or form (its QR
// code is an inline SVG element drawn with presentation attributes, which
// loads nothing), so nothing is allowed, and no other site may frame it. A change to the
// template that needs more must widen this (by hash for inline styles, as
// the status page does).
const DescriptorPageCSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type pageData struct {
	Descriptor
	// SubscribeURI and MessageURI are xmpp: URIs built and escaped by
	// xmppuri.go; html/template would refuse the scheme otherwise.
	SubscribeURI, MessageURI    template.URL
	MessageURIText, ChatCommand string
	// QRCode is the SVG element QRSVG made of MessageURI.
	QRCode                                     template.HTML
	HasQRCode                                  bool
	Title, XRDSURL, PostURL                    string
	Whitelist                                  bool
	HTTPType, XMPPType, DiffType, XRDSType     string
	XRDSHeader, RelDescriptor, MethodSubscribe string
	ServiceSubscribe                           string
}

// html/template escapes every value for its context (attribute, URL,
// text), so node names and URLs cannot break out of the markup.
var pageTemplate = template.Must(template.New("descriptor").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="{{.XRDSHeader}}" content="{{.XRDSURL}}">
<link rel="{{.RelDescriptor}}" href="{{.XRDSURL}}">
<title>{{.Title}} — GetPingd descriptor</title>
</head>
<body>
<h1>{{.Title}}</h1>
<h2>Follow it with any Jabber client</h2>
<p>Send <code>{{.ChatCommand}}</code> to <code>{{.ComponentJID}}</code> from your Jabber client
(Conversations, Dino, Gajim, Monal, Profanity, …): each new item then comes to you as a message.
{{- if .Whitelist}} Only Jabber IDs on the node's whitelist may subscribe: ask its owner to add
yours first.{{end}}</p>
<p><a id="message-uri" href="{{.MessageURI}}">Open a chat with that message</a>
(<code>{{.MessageURIText}}</code>){{if .HasQRCode}}, or scan this code with the Jabber client
on your phone:{{else}}.{{end}}</p>
{{if .HasQRCode}}<p id="qr">{{.QRCode}}</p>
{{end -}}
<p>A client that speaks XEP-0060 publish-subscribe can subscribe to the node itself:
<a id="subscribe-uri" href="{{.SubscribeURI}}">{{.SubscribeURI}}</a>.</p>

<h2>For programs: the GetPingd descriptor</h2>
<p>This is the GetPingd descriptor of the publish-subscribe node <code>{{.Node}}</code>
at <code>{{.ComponentJID}}</code>. Subscribe to it to be told of every change, without polling.</p>
<p>The service description is the XRDS document at <a href="{{.XRDSURL}}">{{.XRDSURL}}</a>
(<code>{{.XRDSType}}</code>, service type <code>{{.ServiceSubscribe}}</code>); this page
points at it with the <code>{{.XRDSHeader}}</code> header and meta tag.</p>

<h3>Over XMPP</h3>
{{if .Whitelist -}}
<p>The node is open to its whitelist only. First ask for your Jabber ID to be added: send
<code>{{.MethodSubscribe}} {{.DescriptorURL}}</code> (or <code>POST {{.PostURL}}</code>) with
<code>Content-Type: {{.XMPPType}}</code>, an <code>Authorization: Bearer</code> token from the
node's owner, and this body:</p>
<pre>&lt;subscribe&gt;&lt;consumer jid="you@example.org"/&gt;&lt;/subscribe&gt;</pre>
<p>Then subscribe to node <code>{{.Node}}</code> at <code>{{.ComponentJID}}</code> with any
Jabber client (XEP-0060). An <code>&lt;unsubscribe&gt;</code> request with the same token
removes the Jabber ID and its subscriptions.</p>
{{- else -}}
<p>Subscribe to node <code>{{.Node}}</code> at <code>{{.ComponentJID}}</code> with any Jabber
client (XEP-0060); nothing else is needed.</p>
{{- end}}

<h3>Over HTTP (web hooks)</h3>
<p>Send <code>{{.MethodSubscribe}} {{.DescriptorURL}}</code> (or <code>POST {{.PostURL}}</code>) with
<code>Content-Type: {{.HTTPType}}</code> and this body:</p>
<pre>&lt;subscribe&gt;&lt;url href="https://you.example.org/changed" method="POST" diff="none"/&gt;&lt;/subscribe&gt;</pre>
<p>The callback is first asked to echo a <code>hub.challenge</code>. Each change then arrives with
the method you named (<code>POST</code> or <code>NOTIFY</code>): an Atom feed of the new entries, or,
with <code>diff="{{.DiffType}}"</code>, a patch against the previous state.
{{- if .Whitelist}} On this node the request needs the <code>Authorization: Bearer</code> token too.{{end}}</p>
</body>
</html>
`))
