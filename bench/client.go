package bench

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxStanza bounds what the light readers accept from a server.
const maxStanza = 16 << 20

// client is a light XMPP c2s session: it logs in with SASL PLAIN on a
// plain loopback stream, binds a resource, sends initial presence, and
// then reads stanzas with the splitter. IQ answers go to whoever waits
// for them; every message goes to onMessage. Every target is measured
// with these same clients.
type client struct {
	jid  string // full JID after bind
	conn net.Conn
	br   *bufio.Reader
	sp   *splitter

	wmu sync.Mutex
	bw  *bufio.Writer

	mu      sync.Mutex
	pending map[string]chan []byte
	nextID  atomic.Int64

	// onMessage is called from the reader for each <message/>, with the
	// time it was read; elem is valid only during the call.
	onMessage atomic.Pointer[func(elem []byte, at time.Time)]
	messages  atomic.Int64
	errs      atomic.Int64
	lastErr   atomic.Pointer[string]
	done      chan struct{}
	readErr   error // why the stream ended, once done is closed
}

// dialClient logs in as user@domain/resource on a c2s address.
func dialClient(ctx context.Context, addr, domain, user, password, resource string) (*client, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &client{
		conn:    conn,
		br:      bufio.NewReaderSize(conn, 64<<10),
		bw:      bufio.NewWriterSize(conn, 64<<10),
		pending: map[string]chan []byte{},
		done:    make(chan struct{}),
	}
	c.sp = newSplitter(c.br, maxStanza)
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	} else {
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	}
	if err := c.login(domain, user, password, resource); err != nil {
		conn.Close()
		return nil, fmt.Errorf("log in as %s@%s/%s: %w", user, domain, resource, err)
	}
	_ = conn.SetDeadline(time.Time{})
	go c.readLoop()
	return c, nil
}

func (c *client) openStream(domain string) ([]byte, error) {
	if err := c.write(fmt.Sprintf(`<?xml version='1.0'?><stream:stream to='%s' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>`, xmlEscape(domain))); err != nil {
		return nil, err
	}
	kind, _, err := c.sp.Next()
	if err != nil {
		return nil, fmt.Errorf("stream header: %w", err)
	}
	if kind != elemStreamHeader {
		return nil, errors.New("no stream header")
	}
	_, features, err := c.sp.Next()
	if err != nil {
		return nil, fmt.Errorf("stream features: %w", err)
	}
	if stanzaName(features) != "features" {
		return nil, fmt.Errorf("expected stream features, got %.200s", features)
	}
	return append([]byte(nil), features...), nil
}

func (c *client) login(domain, user, password, resource string) error {
	features, err := c.openStream(domain)
	if err != nil {
		return err
	}
	if !strings.Contains(string(features), ">PLAIN<") {
		return fmt.Errorf("the server offers no SASL PLAIN: %.300s", features)
	}
	creds := base64.StdEncoding.EncodeToString([]byte("\x00" + user + "\x00" + password))
	if err := c.write(`<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>` + creds + `</auth>`); err != nil {
		return err
	}
	_, answer, err := c.sp.Next()
	if err != nil {
		return fmt.Errorf("SASL: %w", err)
	}
	if stanzaName(answer) != "success" {
		return fmt.Errorf("SASL refused: %.300s", answer)
	}
	// RFC 6120 §6.4.6: a new stream after SASL; the splitter starts over.
	c.sp = newSplitter(c.br, maxStanza)
	if _, err := c.openStream(domain); err != nil {
		return err
	}
	if err := c.write(`<iq type='set' id='bind'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><resource>` + xmlEscape(resource) + `</resource></bind></iq>`); err != nil {
		return err
	}
	_, bound, err := c.sp.Next()
	if err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	if typ, _ := attr(bound, "type"); typ != "result" {
		return fmt.Errorf("bind refused: %.300s", bound)
	}
	j := child(bound, "jid")
	if j == nil {
		return fmt.Errorf("bind answer without a JID: %.300s", bound)
	}
	c.jid = innerText(j)
	// Initial presence, as any client sends; servers route to it.
	return c.write(`<presence/>`)
}

// write sends raw XML and flushes.
func (c *client) write(s string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.bw.WriteString(s); err != nil {
		return err
	}
	return c.bw.Flush()
}

func (c *client) readLoop() {
	defer close(c.done)
	for {
		_, elem, err := c.sp.Next()
		if err != nil {
			c.readErr = err
			c.mu.Lock()
			for id, ch := range c.pending {
				close(ch)
				delete(c.pending, id)
			}
			c.mu.Unlock()
			return
		}
		now := time.Now()
		switch stanzaName(elem) {
		case "message":
			c.messages.Add(1)
			if typ, _ := attr(elem, "type"); typ == "error" {
				c.errs.Add(1)
				s := string(elem)
				c.lastErr.Store(&s)
				continue
			}
			if fn := c.onMessage.Load(); fn != nil {
				(*fn)(elem, now)
			}
		case "iq":
			id, _ := attr(elem, "id")
			typ, _ := attr(elem, "type")
			if typ == "get" || typ == "set" {
				// Servers ping their clients (XEP-0199); answer like a client.
				from, _ := attr(elem, "from")
				_ = c.write(fmt.Sprintf(`<iq type='result' id='%s' to='%s'/>`, xmlEscape(id), xmlEscape(from)))
				continue
			}
			c.mu.Lock()
			ch := c.pending[id]
			delete(c.pending, id)
			c.mu.Unlock()
			if ch != nil {
				ch <- append([]byte(nil), elem...)
			}
		}
	}
}

// sendIQ sends an IQ whose XML is built by stanza(id) and returns the
// channel its answer arrives on (closed if the stream ends first).
func (c *client) sendIQ(stanza func(id string) string) (<-chan []byte, error) {
	id := "q" + strconv.FormatInt(c.nextID.Add(1), 36)
	ch := make(chan []byte, 1)
	c.mu.Lock()
	c.pending[id] = ch
	c.mu.Unlock()
	if err := c.write(stanza(id)); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return nil, err
	}
	return ch, nil
}

// iq sends an IQ and waits for a result; an error answer is an error.
func (c *client) iq(ctx context.Context, stanza func(id string) string) ([]byte, error) {
	ch, err := c.sendIQ(stanza)
	if err != nil {
		return nil, err
	}
	return awaitIQ(ctx, ch)
}

func awaitIQ(ctx context.Context, ch <-chan []byte) ([]byte, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case resp, ok := <-ch:
		if !ok {
			return nil, errors.New("the stream ended before the answer")
		}
		if typ, _ := attr(resp, "type"); typ != "result" {
			return resp, fmt.Errorf("IQ error: %.500s", resp)
		}
		return resp, nil
	}
}

// Close ends the stream and the connection.
func (c *client) Close() {
	_ = c.write(`</stream:stream>`)
	_ = c.conn.Close()
	<-c.done
}
