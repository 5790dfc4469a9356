package component

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/hub"
)

// XEP-0033 Extended Stanza Addressing. A component's every notification
// crosses the component socket and is parsed again by the server; at high
// fan-out that, not pingd, is the limit. When the server offers a
// multicast service (ejabberd's mod_multicast), one notification stanza
// carrying the addresses of a batch of subscribers goes to the service,
// and the server fans it out. After each connection the component looks
// for the service as XEP-0033 §2 says: disco#info on the server's domain,
// then disco#info on each of the domain's disco#items. It reads the
// service's limit on addresses per message from its disco#info form
// (XEP-0128); ejabberd announces a limit only when it was configured, and
// takes 20 addresses per message from a component by default, so 20 is
// what pingd sends when none is announced.
//
// Only subscribers on that server's domain are addressed through it, and
// of them only Config.MulticastShare percent (half by default); the others
// (other domains, the rest of the share, or every subscriber while no
// service is known) get one stanza each, as always. The split is for
// speed: ejabberd's multicast service is one process, decoding every
// address, and its side of the component connection another, parsing
// every stanza; given half each they work in parallel, and on the
// benchmark's two cores the two together fanned out about a quarter
// faster than the service alone. If the service refuses a notification
// (an error message from it), the component sends that notification to
// each of its addresses one by one and stops using the service until it
// reconnects.

const (
	nsAddress = "http://jabber.org/protocol/address"

	// MulticastAuto and MulticastOff are the values of Config.Multicast
	// besides a service's JID.
	MulticastAuto = "auto"
	MulticastOff  = "off"

	// defaultMulticastAddresses is the batch size when the service
	// announces no limit: what ejabberd takes from a component by default.
	defaultMulticastAddresses = 20
	// unlimitedMulticastAddresses is the batch size when the service
	// announces no upper bound ("infinite").
	unlimitedMulticastAddresses = 500
	// DefaultMulticastShare is Config.MulticastShare's default: half of
	// a notification's recipients through the service, half written one
	// by one, measured the fastest split on ejabberd (docs/benchmarks.md).
	DefaultMulticastShare = 50
	// maxDiscoItems bounds the items of the server asked for the feature.
	maxDiscoItems = 32
	// queryTimeout bounds one of pingd's own IQs.
	queryTimeout = 10 * time.Second
)

// multicastService is a multicast service found on one connection.
type multicastService struct {
	// jid is the service's address, domain the server domain whose users
	// it reaches, maxAddrs the addresses one stanza may carry.
	jid      string
	domain   string
	maxAddrs int
	// disabled is set once it refused a notification.
	disabled atomic.Bool
}

// multicastConfig checks Config's multicast settings and returns the
// service JID given (if one is), the domain to look on and the cap.
func multicastConfig(cfg Config, component jid.JID) (mode, service, domain string, err error) {
	mode = strings.TrimSpace(cfg.Multicast)
	switch strings.ToLower(mode) {
	case "", MulticastAuto:
		mode = MulticastAuto
	case MulticastOff:
		return MulticastOff, "", "", nil
	default:
		j, perr := jid.Parse(mode)
		if perr != nil || j.Localpart() != "" || j.Resourcepart() != "" {
			return "", "", "", fmt.Errorf("component: multicast %q: want %q, %q or the JID of a XEP-0033 service such as multicast.example.org",
				cfg.Multicast, MulticastAuto, MulticastOff)
		}
		mode, service = "service", j.String()
	}
	domain = strings.TrimSpace(cfg.MulticastDomain)
	if domain == "" {
		// pubsub.example.org is usually a component of example.org.
		domain = parentDomain(component)
	} else {
		j, perr := jid.Parse(domain)
		if perr != nil || j.Localpart() != "" || j.Resourcepart() != "" {
			return "", "", "", fmt.Errorf("component: multicast domain %q is not a domain", cfg.MulticastDomain)
		}
		domain = j.String()
	}
	if cfg.MulticastMaxAddresses < 0 {
		return "", "", "", fmt.Errorf("component: multicast addresses per stanza %d is negative", cfg.MulticastMaxAddresses)
	}
	if cfg.MulticastShare < 0 || cfg.MulticastShare > 100 {
		return "", "", "", fmt.Errorf("component: multicast share %d%%: want 1 to 100 (0: %d)", cfg.MulticastShare, DefaultMulticastShare)
	}
	return mode, service, domain, nil
}

// MulticastService reports the XEP-0033 service notifications go through
// on the live connection and the addresses per stanza; "" while none.
func (c *Component) MulticastService() (service string, addresses int) {
	cn := c.connection()
	if cn == nil {
		return "", 0
	}
	mc := cn.multicast.Load()
	if mc == nil || mc.disabled.Load() {
		return "", 0
	}
	return mc.jid, mc.maxAddrs
}

// discoverMulticast looks for the multicast service of the server on a new
// connection and, when it finds one, makes the dispatcher use it.
func (d *dispatcher) discoverMulticast(ctx context.Context, cn *connection) {
	defer d.multicastChecked.Add(1)
	if d.multicastMode == MulticastOff || d.multicastDomain == "" {
		return
	}
	service := d.multicastService
	var info *element
	if service != "" {
		// Given: its disco#info only tells its limit.
		info, _ = d.query(ctx, cn, service, `<query xmlns="`+nsDiscoInfo+`"/>`)
	} else {
		service, info = d.findMulticast(ctx, cn)
		if service == "" {
			if ctx.Err() == nil && !cn.broken.Load() {
				d.log.Info("the XMPP server offers no XEP-0033 multicast service; notifications go one stanza per subscriber",
					"domain", d.multicastDomain)
			}
			return
		}
	}
	limit, announced := multicastLimit(info)
	n := d.multicastBatch(limit, announced)
	if n < 2 {
		d.log.Info("the XEP-0033 multicast service takes too few addresses to be worth it; notifications go one stanza per subscriber",
			"service", service, "limit", limit)
		return
	}
	cn.multicast.Store(&multicastService{jid: service, domain: d.multicastDomain, maxAddrs: n})
	d.log.Info("notifications to users of the XMPP server go through its XEP-0033 multicast service",
		"service", service, "domain", d.multicastDomain, "addresses_per_stanza", n, "share_percent", d.multicastShare)
}

// multicastBatch is the addresses per stanza: the configured cap, never
// above an announced limit (-1: unlimited).
func (d *dispatcher) multicastBatch(limit int, announced bool) int {
	switch {
	case !announced && d.multicastMax > 0:
		return d.multicastMax
	case !announced:
		return defaultMulticastAddresses
	case limit < 0 && d.multicastMax > 0:
		return d.multicastMax
	case limit < 0:
		return unlimitedMulticastAddresses
	case d.multicastMax > 0:
		return min(limit, d.multicastMax)
	}
	return limit
}

// findMulticast asks the server's domain, then its items, for the address
// feature; it returns the service and its disco#info, or "".
func (d *dispatcher) findMulticast(ctx context.Context, cn *connection) (string, *element) {
	domain := d.multicastDomain
	info, err := d.query(ctx, cn, domain, `<query xmlns="`+nsDiscoInfo+`"/>`)
	if err == nil && hasFeature(info, nsAddress) {
		return domain, info
	}
	items, err := d.query(ctx, cn, domain, `<query xmlns="`+nsDiscoItems+`"/>`)
	if err != nil {
		return "", nil
	}
	q := items.child(nsDiscoItems, "query")
	asked := 0
	for _, it := range q.childrenNamed(nsDiscoItems, "item") {
		if _, hasNode := it.lookupAttr("node"); hasNode {
			continue
		}
		j, err := jid.Parse(it.attr("jid"))
		if err != nil || j.Localpart() != "" || j.Resourcepart() != "" || j.Equal(d.domain) {
			continue
		}
		if asked++; asked > maxDiscoItems {
			break
		}
		info, err := d.query(ctx, cn, j.String(), `<query xmlns="`+nsDiscoInfo+`"/>`)
		if err == nil && hasFeature(info, nsAddress) {
			return j.String(), info
		}
		if ctx.Err() != nil || cn.broken.Load() {
			break
		}
	}
	return "", nil
}

// hasFeature reports whether a disco#info result lists the feature.
func hasFeature(iq *element, feature string) bool {
	q := iq.child(nsDiscoInfo, "query")
	for _, f := range q.childrenNamed(nsDiscoInfo, "feature") {
		if f.attr("var") == feature {
			return true
		}
	}
	return false
}

// multicastLimit reads the limit on addresses per message from a service's
// disco#info (an XEP-0128 form of FORM_TYPE nsAddress, field "message"):
// -1 for "infinite"; announced is false when it states none.
func multicastLimit(iq *element) (limit int, announced bool) {
	q := iq.child(nsDiscoInfo, "query")
	for _, x := range q.childrenNamed(nsDataForms, "x") {
		f, serr := parseForm(x)
		if serr != nil {
			continue
		}
		if ft := f.Values["FORM_TYPE"]; len(ft) != 1 || strings.TrimSpace(ft[0]) != nsAddress {
			continue
		}
		v, ok, serr := f.single("message")
		if !ok || serr != nil {
			continue
		}
		if strings.EqualFold(v, "infinite") || strings.EqualFold(v, "unbounded") {
			return -1, true
		}
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			return n, true
		}
	}
	return 0, false
}

// domainOf returns the domain part of a JID string (the subscriber
// addresses pingd stores are normalised JIDs).
func domainOf(addr string) string {
	if i := strings.IndexByte(addr, '/'); i >= 0 {
		addr = addr[:i]
	}
	if i := strings.IndexByte(addr, '@'); i >= 0 {
		addr = addr[i+1:]
	}
	return addr
}

// isMulticastBounce reports whether msg (of type error) is a notification
// the connection's multicast service refused, and if so stops using the
// service on this connection.
func (d *dispatcher) isMulticastBounce(cn *connection, msg *element) bool {
	mc := cn.multicast.Load()
	if mc == nil {
		return false
	}
	from, err := jid.Parse(msg.attr("from"))
	if err != nil || from.String() != mc.jid {
		return false
	}
	if mc.disabled.CompareAndSwap(false, true) {
		d.log.Warn("the XEP-0033 multicast service refused a notification; sending one stanza per subscriber until the next connection",
			"service", mc.jid, "error", errorText(msg))
	}
	return true
}

// errorText describes the error of an error stanza for the log.
func errorText(st *element) string {
	e := st.child(st.Name.Space, "error")
	if e == nil {
		return "no error element"
	}
	var parts []string
	for _, ch := range e.Children {
		if ch.Name.Space == nsStanzaErrors {
			if ch.Name.Local == "text" {
				parts = append(parts, strconv.Quote(ch.text()))
			} else {
				parts = append(parts, ch.Name.Local)
			}
		}
	}
	return strings.Join(parts, " ")
}

// resendBounced sends a refused multicast notification to each of its
// addresses on its own, so that no subscriber misses it. Each copy gets
// the message type of its subscription (the bounce, of type error, no
// longer says what it was).
func (d *dispatcher) resendBounced(ctx context.Context, cn *connection, msg *element) {
	var n *hub.Node
	if id, ok := nodeOfStanzaID(msg.attr("id")); ok {
		n, _ = d.store.NodeByID(ctx, id)
	} else if name := eventNode(msg.child(nsPubsubEvent, "event")); name != "" {
		n, _ = d.store.Node(ctx, name)
	}
	types := map[string]string{}
	if n != nil {
		subs, err := d.store.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID, Kind: hub.KindXMPP})
		if err != nil {
			d.log.WarnContext(ctx, "a refused multicast notification is sent again with the node's message type", "node", n.Name, "err", err)
		}
		for i := range subs {
			types[subs[i].Address] = hub.MessageTypeOf(n, subs[i].Options)
		}
	}
	typeOf := func(to string) string {
		if t, ok := types[to]; ok {
			return t
		}
		return hub.MessageTypeOf(n, hub.Options{})
	}
	out, count := renderBounced(msg, typeOf, d.domainStr)
	if count == 0 {
		d.log.Error("a refused multicast notification came back without its addresses or content; its subscribers miss it",
			"error", errorText(msg))
		return
	}
	err := cn.write(func(w *bufio.Writer) error {
		_, err := w.Write(out)
		return err
	})
	if err != nil {
		d.log.WarnContext(ctx, "a refused multicast notification could not be sent again: the stream is gone", "err", err)
		return
	}
	d.sentUnicast.Add(int64(count))
}

// renderBounced renders the notification of a bounced multicast stanza once
// per address it carried (to, cc and bcc addresses with a JID), from the
// component, with what it carried besides the addresses and the error (a
// pubsub#event, a body, a link); typeOf gives each address's message
// type. count is 0 when it carried nothing else or no such address.
func renderBounced(msg *element, typeOf func(to string) string, from string) (out []byte, count int) {
	addrs := msg.child(nsAddress, "addresses")
	if addrs == nil {
		return nil, 0
	}
	var content bytes.Buffer
	for _, ch := range msg.Children {
		if ch.Name.Space == nsAddress || (ch.Name.Local == "error" && ch.Name.Space == msg.Name.Space) {
			continue
		}
		content.Write(ch.standalone())
	}
	if content.Len() == 0 {
		return nil, 0
	}
	for _, a := range addrs.childrenNamed(nsAddress, "address") {
		switch a.attr("type") {
		case "to", "cc", "bcc":
		default:
			continue
		}
		to, err := jid.Parse(a.attr("jid"))
		if err != nil {
			continue
		}
		var b xmlBuf
		// The same notification again: it keeps its id.
		b.open("message", "type", typeOf(to.String()), "id", msg.attr("id"), "from", from, "to", to.String())
		b.Write(content.Bytes())
		b.close("message")
		out = append(out, b.Bytes()...)
		count++
	}
	return out, count
}

// eventNode returns the node a pubsub#event is about.
func eventNode(ev *element) string {
	if ev == nil {
		return ""
	}
	for _, ch := range ev.Children {
		if n := ch.attr("node"); n != "" {
			return n
		}
	}
	return ""
}
