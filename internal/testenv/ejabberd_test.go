package testenv

import (
	"context"
	"encoding/xml"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	"mellium.im/xmpp/component"
	"mellium.im/xmpp/jid"
)

type discoInfo struct {
	Identities []struct {
		Category string `xml:"category,attr"`
		Type     string `xml:"type,attr"`
	} `xml:"query>identity"`
	Features []struct {
		Var string `xml:"var,attr"`
	} `xml:"query>feature"`
}

type discoItems struct {
	Items []struct {
		JID string `xml:"jid,attr"`
	} `xml:"query>item"`
}

func (d discoInfo) has(feature string) bool {
	for _, f := range d.Features {
		if f.Var == feature {
			return true
		}
	}
	return false
}

const nsAddress = "http://jabber.org/protocol/address"

func TestEjabberdLoginAndMulticastDisco(t *testing.T) {
	e := StartEjabberd(t, EjabberdOptions{})
	e.Register("alice", "pw")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := e.Dial(ctx, t, "alice", "pw", "test")
	if got := c.JID.Bare().String(); got != "alice@localhost" {
		t.Fatalf("bound JID = %q, want alice@localhost/…", c.JID)
	}

	info := func(to string) discoInfo {
		t.Helper()
		raw, err := c.SendRaw(ctx, fmt.Sprintf(`<iq type="get" to=%q id="info"><query xmlns="http://jabber.org/protocol/disco#info"/></iq>`, to))
		if err != nil {
			t.Fatalf("disco#info %s: %v", to, err)
		}
		var d discoInfo
		if err := xml.Unmarshal([]byte(raw), &d); err != nil {
			t.Fatalf("disco#info %s: %v\n%s", to, err, raw)
		}
		return d
	}
	// XEP-0033 §2.1: ask the server, then the services it lists.
	var found []string
	if info(e.Domain).has(nsAddress) {
		found = append(found, e.Domain)
	}
	raw, err := c.SendRaw(ctx, fmt.Sprintf(`<iq type="get" to=%q id="items"><query xmlns="http://jabber.org/protocol/disco#items"/></iq>`, e.Domain))
	if err != nil {
		t.Fatalf("disco#items: %v", err)
	}
	var items discoItems
	if err := xml.Unmarshal([]byte(raw), &items); err != nil {
		t.Fatalf("disco#items: %v\n%s", err, raw)
	}
	var listed []string
	for _, it := range items.Items {
		listed = append(listed, it.JID)
		if info(it.JID).has(nsAddress) {
			found = append(found, it.JID)
		}
	}
	if len(found) == 0 {
		t.Fatalf("no %s on the server or its services %v", nsAddress, listed)
	}
	if !strings.Contains(strings.Join(found, " "), e.Multicast) {
		t.Errorf("multicast found at %v, want %s among them", found, e.Multicast)
	}
	ref := info(e.RefPubsub)
	if !ref.has("http://jabber.org/protocol/pubsub") {
		t.Errorf("%s does not announce pubsub: %+v", e.RefPubsub, ref)
	}
}

func TestEjabberdTwoNodesAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	// Two nodes of one test must not collide on names, ports or files.
	a := StartEjabberd(t, EjabberdOptions{LogLevel: "warning"})
	b := StartEjabberd(t, EjabberdOptions{LogLevel: "warning"})
	if a.Node == b.Node || a.C2SAddr == b.C2SAddr || a.Dir == b.Dir {
		t.Fatalf("nodes share identity: %s %s", a.Node, b.Node)
	}
	a.Register("u", "pw")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a.Dial(ctx, t, "u", "pw", "x")
	// The account exists on a only.
	if _, err := DialAddr(ctx, b.C2SAddr, "u@localhost/x", "pw"); err == nil {
		t.Fatal("logged in on the second node with an account of the first")
	}
	b.Stop()
	a.Stop()
	a.Stop() // stopping twice is harmless
}

func TestEjabberdComponentsGetOnlyTheirTraffic(t *testing.T) {
	e := StartEjabberd(t, EjabberdOptions{ExtraComponents: []string{"other.localhost"}, LogLevel: "warning"})
	e.Register("bob", "pw")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := map[string]chan string{}
	for _, name := range e.Components {
		ch := make(chan string, 10)
		got[name] = ch
		conn, err := net.Dial("tcp", e.ComponentAddr)
		if err != nil {
			t.Fatal(err)
		}
		sess, err := component.NewSession(ctx, jid.MustParse(name), []byte(e.Secret), conn)
		if err != nil {
			t.Fatalf("component %s: %v\n%s", name, err, e.Log())
		}
		t.Cleanup(func() { sess.Close(); conn.Close() })
		go func() {
			_ = sess.Serve(xmpp.HandlerFunc(func(r xmlstream.TokenReadEncoder, start *xml.StartElement) error {
				for _, a := range start.Attr {
					if a.Name.Local == "to" {
						ch <- a.Value
					}
				}
				return nil
			}))
		}()
	}
	c := e.Dial(ctx, t, "bob", "pw", "x")
	for _, name := range e.Components {
		if _, err := c.SendRaw(ctx, fmt.Sprintf(`<message to=%q type="normal"><body>hi</body></message>`, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range e.Components {
		select {
		case to := <-got[name]:
			if to != name {
				t.Errorf("component %s got a stanza for %s", name, to)
			}
		case <-ctx.Done():
			t.Fatalf("component %s got nothing", name)
		}
		select {
		case to := <-got[name]:
			t.Errorf("component %s also got a stanza for %s", name, to)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func TestEjabberdPids(t *testing.T) {
	e := StartEjabberd(t, EjabberdOptions{LogLevel: "warning"})
	found := false
	for _, pid := range e.Pids() {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err == nil && strings.HasPrefix(string(comm), "beam") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no Erlang VM among %v", e.Pids())
	}
	e.Stop()
	if pids := e.Pids(); pids != nil {
		t.Errorf("processes after Stop: %v", pids)
	}
}
