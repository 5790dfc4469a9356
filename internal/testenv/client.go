package testenv

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"net"
	"testing"
	"time"

	"mellium.im/sasl"
	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"
)

// Client is a logged-in XMPP client session that records every message
// and presence it receives.
type Client struct {
	JID     jid.JID
	Session *xmpp.Session
	// Stanzas receives each incoming message and presence, as raw XML.
	Stanzas chan []byte
	done    chan error
}

// Dial logs in as user@domain/resource on the server's c2s port. The
// loopback stream is plain; xmpp.Secure tells mellium it is trusted.
func Dial(ctx context.Context, t testing.TB, p *Prosody, user, password, resource string) *Client {
	t.Helper()
	c, err := DialAddr(ctx, p.C2SAddr, user+"@"+p.Domain+"/"+resource, password)
	if err != nil {
		t.Fatalf("dial %s: %v", user, err)
	}
	t.Cleanup(c.Close)
	return c
}

// DialAddr logs in as the full JID on a c2s address. The client answers
// no IQ (mellium answers them service-unavailable).
func DialAddr(ctx context.Context, addr, full, password string) (*Client, error) {
	return DialFeatures(ctx, addr, full, password, nil)
}

// DialFeatures is DialAddr for a client that answers XEP-0030 disco#info
// with these features when features is not nil, as graphical clients do.
func DialFeatures(ctx context.Context, addr, full, password string, features []string) (*Client, error) {
	return dial(ctx, addr, full, password, features, nil)
}

// DialHolding is DialAddr for a client that leaves the IQ gets it is sent
// unanswered until hold is closed, as a client that never answers does:
// its session reads nothing more meanwhile.
func DialHolding(ctx context.Context, addr, full, password string, hold <-chan struct{}) (*Client, error) {
	return dial(ctx, addr, full, password, nil, hold)
}

func dial(ctx context.Context, addr, full, password string, features []string, hold <-chan struct{}) (*Client, error) {
	j, err := jid.Parse(full)
	if err != nil {
		return nil, err
	}
	conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	s, err := xmpp.NewSession(ctx, j.Domain(), j, conn, xmpp.Secure, xmpp.NewNegotiator(func(*xmpp.Session, *xmpp.StreamConfig) xmpp.StreamConfig {
		return xmpp.StreamConfig{Features: []xmpp.StreamFeature{
			xmpp.SASL("", password, sasl.Plain),
			xmpp.BindResource(),
		}}
	}))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("log in as %s: %w", full, err)
	}
	c := &Client{JID: s.LocalAddr(), Session: s, Stanzas: make(chan []byte, 100000), done: make(chan error, 1)}
	go func() {
		c.done <- s.Serve(xmpp.HandlerFunc(func(t xmlstream.TokenReadEncoder, start *xml.StartElement) error {
			if hold != nil && start.Name.Local == "iq" && attr(start, "type") == "get" {
				<-hold
				return nil
			}
			if features != nil && start.Name.Local == "iq" && attr(start, "type") == "get" {
				return answerDiscoInfo(t, start, features)
			}
			var buf bytes.Buffer
			e := xml.NewEncoder(&buf)
			if _, err := xmlstream.Copy(e, xmlstream.MultiReader(xmlstream.Token(*start), xmlstream.Inner(t), xmlstream.Token(start.End()))); err != nil {
				return err
			}
			if err := e.Flush(); err != nil {
				return err
			}
			select {
			case c.Stanzas <- buf.Bytes():
			default: // a test that stops reading must not block the session
			}
			return nil
		}))
	}()
	// Initial presence so the server routes messages to this resource.
	if err := s.Send(ctx, xmlstream.Wrap(nil, xml.StartElement{Name: xml.Name{Local: "presence"}})); err != nil {
		c.Close()
		return nil, fmt.Errorf("send presence: %w", err)
	}
	return c, nil
}

// SendRaw sends a stanza written as XML text and, for an IQ of type get or
// set, waits for the answer and returns it as XML text.
func (c *Client) SendRaw(ctx context.Context, stanza string) (string, error) {
	d := xml.NewDecoder(bytes.NewBufferString(stanza))
	tok, err := d.Token()
	if err != nil {
		return "", err
	}
	start, ok := tok.(xml.StartElement)
	if !ok {
		return "", fmt.Errorf("not a start element: %T", tok)
	}
	r := xmlstream.MultiReader(xmlstream.Token(start), xmlstream.Inner(d), xmlstream.Token(start.End()))
	if start.Name.Local != "iq" {
		return "", c.Session.Send(ctx, r)
	}
	resp, err := c.Session.SendIQ(ctx, r)
	if err != nil {
		return "", err
	}
	defer resp.Close()
	var buf bytes.Buffer
	e := xml.NewEncoder(&buf)
	if _, err := xmlstream.Copy(e, resp); err != nil {
		return "", err
	}
	if err := e.Flush(); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// Close ends the session.
func (c *Client) Close() {
	_ = c.Session.Close()
	_ = c.Session.Conn().Close()
}

func attr(start *xml.StartElement, local string) string {
	for _, a := range start.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// answerDiscoInfo answers a disco#info get with the features (any other
// get is left to mellium, which answers service-unavailable).
func answerDiscoInfo(t xmlstream.TokenReadEncoder, start *xml.StartElement, features []string) error {
	tok, err := t.Token()
	if err != nil {
		return err
	}
	q, ok := tok.(xml.StartElement)
	if !ok || q.Name.Space != "http://jabber.org/protocol/disco#info" || q.Name.Local != "query" {
		return nil
	}
	const ns = "http://jabber.org/protocol/disco#info"
	iq := xml.StartElement{Name: xml.Name{Local: "iq"}, Attr: []xml.Attr{
		{Name: xml.Name{Local: "type"}, Value: "result"},
		{Name: xml.Name{Local: "id"}, Value: attr(start, "id")},
		{Name: xml.Name{Local: "to"}, Value: attr(start, "from")},
	}}
	query := xml.StartElement{Name: xml.Name{Space: ns, Local: "query"}}
	toks := []xml.Token{iq, query}
	el := func(local string, attrs ...string) {
		se := xml.StartElement{Name: xml.Name{Local: local}}
		for i := 0; i+1 < len(attrs); i += 2 {
			se.Attr = append(se.Attr, xml.Attr{Name: xml.Name{Local: attrs[i]}, Value: attrs[i+1]})
		}
		toks = append(toks, se, se.End())
	}
	el("identity", "category", "client", "type", "pc")
	for _, f := range features {
		el("feature", "var", f)
	}
	toks = append(toks, query.End(), iq.End())
	for _, tok := range toks {
		if err := t.EncodeToken(tok); err != nil {
			return err
		}
	}
	return nil
}
