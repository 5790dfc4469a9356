package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const (
	nsPubsub      = "http://jabber.org/protocol/pubsub"
	nsPubsubEvent = "http://jabber.org/protocol/pubsub#event"
	nsAddress     = "http://jabber.org/protocol/address"
)

// rawComponent is the limit pingd is held against: an XEP-0114 component
// with no logic and no state but an in-memory subscriber list. It answers
// create, subscribe and publish requests and, for each publish, writes the
// same notification stanza pingd writes (rendered once, only "to" changes)
// to every subscriber, in one buffered write. With multicast set it sends
// one XEP-0033 message per publish to that service instead, with share
// percent of the subscribers as bcc addresses, so the server does the
// fan-out, and writes the others one stanza each, as pingd does
// (component.Config.MulticastShare).
type rawComponent struct {
	domain    string
	multicast string
	share     int

	conn net.Conn
	sp   *splitter
	wmu  sync.Mutex
	bw   *bufio.Writer

	mu   sync.Mutex
	subs map[string][]string // node → subscriber JIDs, escaped for an attribute

	ids atomic.Uint64

	// stanzaErrors counts error stanzas the server sent back (a refused
	// notification, a multicast the server would not relay).
	stanzaErrors atomic.Int64
	lastError    atomic.Pointer[string]
	done         chan struct{}
}

// dialRawComponent connects and authenticates as domain (XEP-0114).
func dialRawComponent(ctx context.Context, addr, domain, secret, multicast string, share int) (*rawComponent, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	rc := &rawComponent{
		domain:    domain,
		multicast: multicast,
		share:     share,
		conn:      conn,
		bw:        bufio.NewWriterSize(conn, 256<<10),
		subs:      map[string][]string{},
		done:      make(chan struct{}),
	}
	rc.sp = newSplitter(bufio.NewReaderSize(conn, 64<<10), maxStanza)
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	if err := rc.handshake(secret); err != nil {
		conn.Close()
		return nil, fmt.Errorf("component %s: %w", domain, err)
	}
	_ = conn.SetDeadline(time.Time{})
	go rc.readLoop()
	return rc, nil
}

func (rc *rawComponent) handshake(secret string) error {
	if err := rc.write([]byte(fmt.Sprintf(`<stream:stream xmlns='jabber:component:accept' xmlns:stream='http://etherx.jabber.org/streams' to='%s'>`, xmlEscape(rc.domain)))); err != nil {
		return err
	}
	kind, header, err := rc.sp.Next()
	if err != nil {
		return fmt.Errorf("stream header: %w", err)
	}
	if kind != elemStreamHeader {
		return errors.New("no stream header")
	}
	id, ok := attr(header, "id")
	if !ok {
		return fmt.Errorf("stream header without id: %s", header)
	}
	sum := sha1.Sum([]byte(id + secret))
	if err := rc.write([]byte("<handshake>" + hex.EncodeToString(sum[:]) + "</handshake>")); err != nil {
		return err
	}
	_, answer, err := rc.sp.Next()
	if err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	if stanzaName(answer) != "handshake" {
		return fmt.Errorf("handshake refused: %.300s", answer)
	}
	return nil
}

func (rc *rawComponent) write(b []byte) error {
	rc.wmu.Lock()
	defer rc.wmu.Unlock()
	if _, err := rc.bw.Write(b); err != nil {
		return err
	}
	return rc.bw.Flush()
}

func (rc *rawComponent) readLoop() {
	defer close(rc.done)
	for {
		_, elem, err := rc.sp.Next()
		if err != nil {
			return
		}
		if typ, _ := attr(elem, "type"); typ == "error" {
			rc.stanzaErrors.Add(1)
			s := string(elem)
			rc.lastError.Store(&s)
			continue
		}
		if stanzaName(elem) == "iq" {
			rc.handleIQ(elem)
		}
	}
}

func (rc *rawComponent) handleIQ(iq []byte) {
	id, _ := attr(iq, "id")
	from, _ := attr(iq, "from")
	typ, _ := attr(iq, "type")
	reply := func(inner string) {
		_ = rc.write([]byte(fmt.Sprintf(`<iq type='result' id='%s' from='%s' to='%s'>%s</iq>`, xmlEscape(id), xmlEscape(rc.domain), xmlEscape(from), inner)))
	}
	fail := func(cond string) {
		_ = rc.write([]byte(fmt.Sprintf(`<iq type='error' id='%s' from='%s' to='%s'><error type='cancel'><%s xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>`, xmlEscape(id), xmlEscape(rc.domain), xmlEscape(from), cond)))
	}
	ps := child(iq, "pubsub")
	if typ != "set" || ps == nil {
		if typ == "get" || typ == "set" {
			fail("service-unavailable")
		}
		return
	}
	switch {
	case child(ps, "create") != nil:
		node, _ := attr(child(ps, "create"), "node")
		rc.mu.Lock()
		if _, ok := rc.subs[node]; !ok {
			rc.subs[node] = nil
		}
		rc.mu.Unlock()
		reply("")
	case child(ps, "subscribe") != nil:
		sub := child(ps, "subscribe")
		node, _ := attr(sub, "node")
		jid, _ := attr(sub, "jid")
		rc.mu.Lock()
		rc.subs[node] = append(rc.subs[node], xmlEscape(jid))
		rc.mu.Unlock()
		reply(fmt.Sprintf(`<pubsub xmlns='%s'><subscription node='%s' jid='%s' subscription='subscribed'/></pubsub>`, nsPubsub, xmlEscape(node), xmlEscape(jid)))
	case child(ps, "publish") != nil:
		pub := child(ps, "publish")
		node, _ := attr(pub, "node")
		item := child(pub, "item")
		end := bytes.LastIndex(item, []byte("</item>"))
		if item == nil || end < 0 {
			fail("bad-request")
			return
		}
		item = item[:end+len("</item>")]
		rc.mu.Lock()
		subs := rc.subs[node]
		rc.mu.Unlock()
		reply("")
		rc.notify(node, item, subs)
	default:
		fail("feature-not-implemented")
	}
}

// notify writes the notifications of one item.
func (rc *rawComponent) notify(node string, item []byte, subs []string) {
	if len(subs) == 0 {
		return
	}
	// One id per item, shared by its copies, as pingd gives them.
	id := strconv.FormatUint(rc.ids.Add(1), 10)
	head := `' id='raw-` + id + `'>` // closes the "to" value and the start tag
	body := []byte(head + `<event xmlns='` + nsPubsubEvent + `'><items node='` + xmlEscape(node) + `'>`)
	body = append(body, item...)
	body = append(body, "</items></event></message>"...)
	rc.wmu.Lock()
	defer rc.wmu.Unlock()
	one := subs
	var grouped []string
	if rc.multicast != "" {
		k := len(subs) * (100 - rc.share) / 100
		one, grouped = subs[:k], subs[k:]
		if len(grouped) < 2 {
			one, grouped = subs, nil
		}
	}
	if len(grouped) > 0 {
		// First, as pingd writes it: the server's multicast service fans
		// it out while the single stanzas are parsed.
		rc.bw.WriteString(`<message type='headline' from='` + xmlEscape(rc.domain) + `' to='` + xmlEscape(rc.multicast) + head + `<addresses xmlns='` + nsAddress + `'>`)
		for _, s := range grouped {
			rc.bw.WriteString(`<address type='bcc' jid='` + s + `'/>`)
		}
		rc.bw.WriteString(`</addresses>`)
		rc.bw.Write(body[len(head):])
	}
	prefix := `<message type='headline' from='` + xmlEscape(rc.domain) + `' to='`
	for _, s := range one {
		rc.bw.WriteString(prefix)
		rc.bw.WriteString(s)
		rc.bw.Write(body)
	}
	_ = rc.bw.Flush()
}

// Close ends the stream.
func (rc *rawComponent) Close() {
	_ = rc.write([]byte(`</stream:stream>`))
	_ = rc.conn.Close()
	<-rc.done
}
