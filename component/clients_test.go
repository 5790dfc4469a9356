package component

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// Tests of what plain Jabber clients use: readable notifications,
// subscription options, ad-hoc commands and presence, against a real
// Prosody.

// nextMessage waits for the next message stanza matching keep.
func nextMessage(t testing.TB, c *testenv.Client, d time.Duration, keep func(*element) bool) *element {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case raw := <-c.Stanzas:
			el, err := parseDocument(raw)
			if err != nil {
				t.Fatalf("unparsable stanza %q: %v", raw, err)
			}
			if el.Name.Local == "message" && keep(el) {
				return el
			}
		case <-timeout:
			t.Fatalf("%s: no matching message within %s", c.JID, d)
			return nil
		}
	}
}

func isEvent(el *element) bool { return el.child(nsPubsubEvent, "event") != nil }

// isNotification reports whether a message is one of pingd's notifications
// (its id names a node), not an answer to a command.
func isNotification(el *element) bool {
	_, ok := nodeOfStanzaID(el.attr("id"))
	return ok && el.attr("type") != "error"
}

// isPlain reports whether a message is a plain notification: pingd's, with
// a body and without a pubsub#event.
func isPlain(el *element) bool { return isNotification(el) && !isEvent(el) && bodyOf(el) != "" }

// oobURL is the XEP-0066 link of a message ("" without one).
func oobURL(el *element) string {
	return el.child(nsOOB, "x").child(nsOOB, "url").text()
}

// noNotifications checks that no notification of pingd arrives for a while.
func noNotifications(t testing.TB, c *testenv.Client, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case raw := <-c.Stanzas:
			if el, err := parseDocument(raw); err == nil && el.Name.Local == "message" && (isNotification(el) || isEvent(el)) {
				t.Fatalf("%s: unexpected notification %s", c.JID, raw)
			}
		case <-timeout:
			return
		}
	}
}

// bodyOf is a message's body text ("" without one).
func bodyOf(el *element) string {
	if b := el.child(el.Name.Space, "body"); b != nil {
		return b.text()
	}
	return ""
}

// chatSay sends a chat command and returns the answer's body.
func chatSay(t *testing.T, e *env, c *testenv.Client, body string) string {
	t.Helper()
	var b xmlBuf
	b.open("message", "type", "chat", "to", e.p.ComponentDomain).element("body", body).close("message")
	if _, err := c.SendRaw(e.ctx, b.String()); err != nil {
		t.Fatal(err)
	}
	ans := nextMessage(t, c, 10*time.Second, func(el *element) bool { return el.attr("type") == "chat" && !isNotification(el) && !isEvent(el) })
	return bodyOf(ans)
}

func TestReadableNotifications(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("demo", "Demo feed", hub.AccessOpen)
	alice := e.dial("alice", "plain") // only chat: subscribes by chat
	bob := e.dial("bob", "pubsub")    // XEP-0060 with subscription options

	if got := chatSay(t, e, alice, "subscribe demo"); !strings.Contains(got, `Subscribed to "demo"`) {
		t.Fatalf("subscribe answered %q", got)
	}
	// A plain XEP-0060 subscription (a client's service browser) gets a
	// readable body beside the event by default.
	result(t, e.request(bob, "set", subscribePayload("demo", bob.JID.String())))

	if _, err := e.hub.Publish(e.ctx, "demo", "", []hub.Entry{{
		ID: "r1", Title: "Hello <readers>", Link: "http://example.org/r1",
		Summary: "A short text about what changed.",
		Payload: atomEntry("r1", "Hello &lt;readers&gt;"),
	}}); err != nil {
		t.Fatal(err)
	}
	// A chat subscriber gets a plain message of type chat: the readable
	// text, an XEP-0066 link, and no pubsub#event (which Profanity, for
	// one, would drop the message for).
	msg := nextMessage(t, alice, 10*time.Second, isNotification)
	if msg.attr("type") != "chat" || isEvent(msg) {
		t.Errorf("chat subscriber's notification: %s, want a plain chat message", msg.standalone())
	}
	body := bodyOf(msg)
	for _, want := range []string{"[Demo feed]", "Hello <readers>", "http://example.org/r1", "A short text about what changed."} {
		if !strings.Contains(body, want) {
			t.Errorf("body %q lacks %q", body, want)
		}
	}
	if u := oobURL(msg); u != "http://example.org/r1" {
		t.Errorf("the XEP-0066 link is %q in %s", u, msg.standalone())
	}
	plain := nextMessage(t, bob, 10*time.Second, isEvent)
	if b := bodyOf(plain); b != body {
		t.Errorf("a plain XEP-0060 subscriber got the body %q, want the readable text %q", b, body)
	}
	if plain.attr("id") != msg.attr("id") {
		t.Errorf("the event's id %q is not the plain message's %q: one id per item", plain.attr("id"), msg.attr("id"))
	}

	// Bob reads his options, asks for a body and chat messages, and gets them.
	opts := result(t, e.request(bob, "get", fmt.Sprintf(`<pubsub xmlns=%q><options node="demo" jid=%q/></pubsub>`, nsPubsub, bob.JID)))
	form, serr := parseForm(find(opts, "pubsub", "options", "x"))
	if serr != nil {
		t.Fatalf("options form: %v in %s", serr, opts.standalone())
	}
	if v := form.Values[fieldIncludeBody]; len(v) != 1 || v[0] != "1" {
		t.Errorf("include_body before = %v, want 1 (the default)", v)
	}
	if v := form.Values["FORM_TYPE"]; len(v) != 1 || v[0] != formSubscribeOptions {
		t.Errorf("FORM_TYPE = %v", v)
	}
	submit := fmt.Sprintf(`<pubsub xmlns=%q><options node="demo" jid=%q><x xmlns="jabber:x:data" type="submit">`+
		`<field var="FORM_TYPE" type="hidden"><value>%s</value></field>`+
		`<field var="pubsub#include_body"><value>true</value></field>`+
		`<field var="x-pingd#message_type"><value>chat</value></field></x></options></pubsub>`, nsPubsub, bob.JID, formSubscribeOptions)
	result(t, e.request(bob, "set", submit))
	bad := strings.Replace(submit, "<value>chat</value>", "<value>groupchat</value>", 1)
	stanzaErr(t, e.request(bob, "set", bad), "modify", "bad-request", "invalid-options")
	// Fields pingd does not offer: taken when they ask for what pingd does
	// anyway, refused (and nothing changed) when they ask for more.
	anyway := strings.Replace(submit, `<field var="pubsub#include_body">`,
		`<field var="pubsub#deliver"><value>1</value></field><field var="pubsub#digest"><value>0</value></field><field var="pubsub#include_body">`, 1)
	result(t, e.request(bob, "set", anyway))
	for _, refused := range []string{
		strings.Replace(anyway, `<field var="pubsub#deliver"><value>1</value>`, `<field var="pubsub#deliver"><value>0</value>`, 1),
		strings.Replace(submit, "<value>true</value>", `<value>false</value></field><field var="pubsub#expire"><value>2030-01-01T00:00:00Z</value>`, 1),
		strings.Replace(submit, "<value>true</value>", `<value>false</value></field><field var="pubsub#frobnicate"><value>1</value>`, 1),
	} {
		stanzaErr(t, e.request(bob, "set", refused), "modify", "bad-request", "invalid-options")
	}
	opts = result(t, e.request(bob, "get", fmt.Sprintf(`<pubsub xmlns=%q><options node="demo" jid=%q/></pubsub>`, nsPubsub, bob.JID)))
	if form, serr := parseForm(find(opts, "pubsub", "options", "x")); serr != nil || len(form.Values[fieldIncludeBody]) != 1 ||
		form.Values[fieldIncludeBody][0] != "1" || form.Values[fieldMessageType][0] != "chat" {
		t.Errorf("after refused option forms the options are %s, want include_body 1 and chat as set before", opts.standalone())
	}
	// Options of someone else's subscription: forbidden; of no subscription: not-subscribed.
	stanzaErr(t, e.request(bob, "get", fmt.Sprintf(`<pubsub xmlns=%q><options node="demo" jid=%q/></pubsub>`, nsPubsub, alice.JID)), "auth", "forbidden", "")
	stanzaErr(t, e.request(alice, "get", fmt.Sprintf(`<pubsub xmlns=%q><options node="demo" jid=%q/></pubsub>`, nsPubsub, alice.JID)), "cancel", "unexpected-request", "not-subscribed")

	e.publish("demo", "r2")
	msg = nextMessage(t, bob, 10*time.Second, isEvent)
	if msg.attr("type") != "chat" || !strings.Contains(bodyOf(msg), "Title r2") || !strings.Contains(bodyOf(msg), "http://example.org/r2") {
		t.Errorf("after the options: %s", msg.standalone())
	}
	if got := nextMessage(t, alice, 10*time.Second, isNotification); !strings.Contains(bodyOf(got), "Title r2") || got.attr("type") != "chat" || isEvent(got) {
		t.Errorf("alice after bob's options: %s", got.standalone())
	}

	// Subscribe and configure in one request (XEP-0060 §6.3.7).
	carol := e.p.Register("carol", password)
	_ = carol
	cc := e.dial("carol", "sc")
	// Options pingd cannot honour: no subscription is made.
	stanzaErr(t, e.request(cc, "set", fmt.Sprintf(`<pubsub xmlns=%q><subscribe node="demo" jid=%q/><options><x xmlns="jabber:x:data" type="submit">`+
		`<field var="pubsub#deliver"><value>0</value></field></x></options></pubsub>`, nsPubsub, cc.JID)), "modify", "bad-request", "invalid-options")
	if subs := result(t, e.request(cc, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><subscriptions/></pubsub>`)); len(find(subs, "pubsub", "subscriptions").Children) != 0 {
		t.Errorf("a refused subscribe-and-configure left a subscription: %s", subs.standalone())
	}
	ans := result(t, e.request(cc, "set", fmt.Sprintf(`<pubsub xmlns=%q><subscribe node="demo" jid=%q/><options><x xmlns="jabber:x:data" type="submit">`+
		`<field var="pubsub#include_body"><value>1</value></field></x></options></pubsub>`, nsPubsub, cc.JID)))
	if f := find(ans, "pubsub", "options", "x"); f == nil || f.attr("type") != "result" {
		t.Errorf("subscribe-and-configure answered %s", ans.standalone())
	}
	// First the newest item, with the body asked for, then the next.
	if got := nextMessage(t, cc, 10*time.Second, isEvent); !strings.Contains(bodyOf(got), "Title r2") || got.child(nsDelay, "delay") == nil {
		t.Errorf("subscribe-and-configure subscriber was sent %s, want the newest item with a body and a delay", got.standalone())
	}
	e.publish("demo", "r3")
	if got := nextMessage(t, cc, 10*time.Second, isEvent); !strings.Contains(bodyOf(got), "Title r3") {
		t.Errorf("subscribe-and-configure subscriber got %s", got.standalone())
	}
	// The service says it supports subscription options.
	infoQ := result(t, e.request(bob, "get", `<query xmlns="http://jabber.org/protocol/disco#info"/>`))
	if !strings.Contains(string(infoQ.standalone()), nsPubsub+"#subscription-options") {
		t.Error("disco#info does not list subscription-options")
	}
}

// command sends an ad-hoc command request and returns the answer.
func command(t *testing.T, e *env, c *testenv.Client, node, action, session, formXML string) *element {
	t.Helper()
	attrs := fmt.Sprintf(`node=%q`, node)
	if action != "" {
		attrs += fmt.Sprintf(` action=%q`, action)
	}
	if session != "" {
		attrs += fmt.Sprintf(` sessionid=%q`, session)
	}
	return e.request(c, "set", fmt.Sprintf(`<command xmlns=%q %s>%s</command>`, nsCommands, attrs, formXML))
}

func submitFields(fields map[string]string) string {
	var b strings.Builder
	b.WriteString(`<x xmlns="jabber:x:data" type="submit">`)
	for k, v := range fields {
		var vb xmlBuf
		vb.open("field", "var", k).element("value", v).close("field")
		b.WriteString(vb.String())
	}
	b.WriteString(`</x>`)
	return b.String()
}

// completedNote checks a completed command and returns its note.
func completedNote(t *testing.T, el *element, wantType string) string {
	t.Helper()
	cmd := find(result(t, el), "command")
	if cmd == nil || cmd.attr("status") != "completed" {
		t.Fatalf("want a completed command, got %s", el.standalone())
	}
	note := cmd.child(nsCommands, "note")
	if note == nil || note.attr("type") != wantType {
		t.Fatalf("want a note of type %s, got %s", wantType, el.standalone())
	}
	return note.text()
}

func TestAdhocCommands(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("demo", "Demo feed", hub.AccessOpen)
	e.publish("demo", "a1", "a2")
	alice := e.dial("alice", "adhoc")
	admin := e.dial("admin", "adhoc")

	listed := func(c *testenv.Client) []string {
		q := result(t, e.request(c, "get", fmt.Sprintf(`<query xmlns=%q node=%q/>`, nsDiscoItems, nsCommands)))
		var nodes []string
		for _, it := range find(q, "query").childrenNamed(nsDiscoItems, "item") {
			nodes = append(nodes, it.attr("node"))
		}
		return nodes
	}
	user, owner := listed(alice), listed(admin)
	if !containsAll(user, "pingd#subscribe", "pingd#unsubscribe", "pingd#list", "pingd#nodes", "pingd#last") || containsAny(user, "pingd#create-node") {
		t.Errorf("a user sees commands %v", user)
	}
	if !containsAll(owner, "pingd#subscribe", "pingd#create-node", "pingd#set-source", "pingd#set-access", "pingd#whitelist-add", "pingd#whitelist-remove", "pingd#source-status") {
		t.Errorf("an owner sees commands %v", owner)
	}
	ci := result(t, e.request(alice, "get", fmt.Sprintf(`<query xmlns=%q node="pingd#subscribe"/>`, nsDiscoInfo)))
	if id := find(ci, "query", "identity"); id == nil || id.attr("category") != "automation" || id.attr("type") != "command-node" {
		t.Errorf("disco#info on a command: %s", ci.standalone())
	}
	// XEP-0050 §2.3: an owner command is not shown to a user; §2.2: the
	// command list has an identity of its own.
	stanzaErr(t, e.request(alice, "get", fmt.Sprintf(`<query xmlns=%q node="pingd#create-node"/>`, nsDiscoInfo)), "auth", "forbidden", "")
	oi := result(t, e.request(admin, "get", fmt.Sprintf(`<query xmlns=%q node="pingd#create-node"/>`, nsDiscoInfo)))
	if id := find(oi, "query", "identity"); id == nil || id.attr("type") != "command-node" {
		t.Errorf("disco#info on an owner command, by an owner: %s", oi.standalone())
	}
	li := result(t, e.request(alice, "get", fmt.Sprintf(`<query xmlns=%q node=%q/>`, nsDiscoInfo, nsCommands)))
	if id := find(li, "query", "identity"); id == nil || id.attr("category") != "automation" || id.attr("type") != "command-list" {
		t.Errorf("disco#info on the command list: %s", li.standalone())
	}
	root := result(t, e.request(alice, "get", fmt.Sprintf(`<query xmlns=%q/>`, nsDiscoInfo)))
	if !strings.Contains(string(root.standalone()), `var="`+nsCommands+`"`) {
		t.Error("disco#info does not advertise ad-hoc commands")
	}

	// Execute: a form; complete it: subscribed, with a body by default.
	first := find(result(t, command(t, e, alice, "pingd#subscribe", "execute", "", "")), "command")
	if first.attr("status") != "executing" || first.child(nsDataForms, "x") == nil || first.attr("sessionid") == "" {
		t.Fatalf("execute answered %s", first.standalone())
	}
	session := first.attr("sessionid")
	note := completedNote(t, command(t, e, alice, "pingd#subscribe", "complete", session, submitFields(map[string]string{"target": "demo"})), "info")
	if !strings.Contains(note, `Subscribed to "demo"`) {
		t.Errorf("subscribe note %q", note)
	}
	e.publish("demo", "a3")
	if got := nextMessage(t, alice, 10*time.Second, func(el *element) bool { return isPlain(el) && strings.Contains(bodyOf(el), "a3") }); got.attr("type") != "chat" {
		t.Errorf("ad-hoc subscriber got %s, want a plain chat message", got.standalone())
	}
	if n := completedNote(t, command(t, e, alice, "pingd#list", "", "", ""), "info"); !strings.Contains(n, "demo") {
		t.Errorf("list note %q", n)
	}
	if n := completedNote(t, command(t, e, alice, "pingd#nodes", "execute", "", ""), "info"); !strings.Contains(n, "Demo feed") {
		t.Errorf("nodes note %q", n)
	}
	if n := completedNote(t, command(t, e, alice, "pingd#last", "execute", "s1", submitFields(map[string]string{"node": "demo", "count": "2"})), "info"); !strings.Contains(n, "Title a3") || strings.Contains(n, "Title a1") {
		t.Errorf("last note %q", n)
	}
	if n := completedNote(t, command(t, e, alice, "pingd#subscribe", "complete", "s2", submitFields(map[string]string{"target": "nope"})), "error"); !strings.Contains(n, `no node called "nope"`) {
		t.Errorf("subscribe to nothing: note %q", n)
	}
	// Cancel, a bad action, an unknown command.
	if c := find(result(t, command(t, e, alice, "pingd#subscribe", "cancel", session, "")), "command"); c.attr("status") != "canceled" {
		t.Errorf("cancel answered %s", c.standalone())
	}
	stanzaErrNS(t, command(t, e, alice, "pingd#subscribe", "jump", "", ""), "bad-request", "malformed-action")
	stanzaErrNS(t, command(t, e, alice, "pingd#subscribe", "prev", session, ""), "bad-request", "bad-action")
	stanzaErr(t, command(t, e, alice, "pingd#frobnicate", "execute", "", ""), "cancel", "item-not-found", "")

	// Owner commands are refused to others, even when they know the node.
	stanzaErr(t, command(t, e, alice, "pingd#create-node", "execute", "", ""), "auth", "forbidden", "")
	stanzaErr(t, command(t, e, alice, "pingd#create-node", "complete", "x", submitFields(map[string]string{"node": "mine"})), "auth", "forbidden", "")
	if _, err := e.hub.Node(e.ctx, "mine"); err == nil {
		t.Error("a refused create-node created the node")
	}

	// The owner: create a whitelist node, add alice, show its status.
	note = completedNote(t, command(t, e, admin, "pingd#create-node", "complete", "o1", submitFields(map[string]string{
		"node": "club", "title": "Club", "source": "http://127.0.0.1:9/club.xml", "access_model": "whitelist"})), "info")
	if !strings.Contains(note, `Created the node "club"`) {
		t.Errorf("create-node note %q", note)
	}
	club, err := e.hub.Node(e.ctx, "club")
	if err != nil || club.AccessModel != hub.AccessWhitelist || club.SourceURL != "http://127.0.0.1:9/club.xml" {
		t.Fatalf("club = %+v, %v", club, err)
	}
	if n := completedNote(t, command(t, e, alice, "pingd#subscribe", "complete", "s3", submitFields(map[string]string{"target": "club"})), "error"); !strings.Contains(n, "closed") {
		t.Errorf("non-member subscribe note %q", n)
	}
	completedNote(t, command(t, e, admin, "pingd#whitelist-add", "complete", "o2", submitFields(map[string]string{"node": "club", "jid": alice.JID.String()})), "info")
	completedNote(t, command(t, e, alice, "pingd#subscribe", "complete", "s4", submitFields(map[string]string{"target": "club"})), "info")
	if n := completedNote(t, command(t, e, admin, "pingd#source-status", "complete", "o3", submitFields(map[string]string{"node": "club"})), "info"); !strings.Contains(n, "http://127.0.0.1:9/club.xml") || !strings.Contains(n, "Not fetched yet") {
		t.Errorf("source-status note %q", n)
	}
	completedNote(t, command(t, e, admin, "pingd#set-source", "complete", "o4", submitFields(map[string]string{"node": "club", "source": "http://127.0.0.1:9/other.xml"})), "info")
	if club, _ = e.hub.Node(e.ctx, "club"); club.SourceURL != "http://127.0.0.1:9/other.xml" {
		t.Errorf("set-source left %q", club.SourceURL)
	}
	completedNote(t, command(t, e, admin, "pingd#whitelist-remove", "complete", "o5", submitFields(map[string]string{"node": "club", "jid": alice.JID.String()})), "info")
	if subs, _ := e.hub.Subscriptions(e.ctx, hub.SubscriptionFilter{NodeID: club.ID, BareJID: alice.JID.Bare().String()}); len(subs) != 0 {
		t.Errorf("removing alice from the whitelist left %d subscriptions", len(subs))
	}
	completedNote(t, command(t, e, admin, "pingd#set-access", "complete", "o6", submitFields(map[string]string{"node": "club", "access_model": "open"})), "info")
	if club, _ = e.hub.Node(e.ctx, "club"); club.AccessModel != hub.AccessOpen {
		t.Errorf("set-access left %q", club.AccessModel)
	}
}

// stanzaErrNS checks an error with an XEP-0050 condition.
func stanzaErrNS(t *testing.T, el *element, cond, app string) {
	t.Helper()
	errEl := el.child(el.Name.Space, "error")
	if el.attr("type") != "error" || errEl == nil || errEl.child(nsStanzaErrors, cond) == nil || errEl.child(nsCommands, app) == nil {
		t.Fatalf("want %s with commands condition %s, got %s", cond, app, el.standalone())
	}
}

func containsAll(list []string, want ...string) bool {
	for _, w := range want {
		if !containsAny(list, w) {
			return false
		}
	}
	return true
}

func containsAny(list []string, want ...string) bool {
	for _, l := range list {
		for _, w := range want {
			if l == w {
				return true
			}
		}
	}
	return false
}

func TestChatSubscribeByURL(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	alice := e.dial("alice", "url")
	const feed = "http://127.0.0.1:9/blog/feed.xml"
	if got := chatSay(t, e, alice, "subscribe "+feed); !strings.Contains(got, "PINGD_OPEN_SOURCES") {
		t.Errorf("closed pingd answered %q", got)
	}
	if nodes, _ := e.hub.Nodes(e.ctx); len(nodes) != 0 {
		t.Fatalf("a refused URL subscription created %d nodes", len(nodes))
	}
	// A node an owner made for the feed is found by its URL.
	cfg := hub.DefaultNodeConfig()
	cfg.Title = "Blog"
	if _, _, err := e.hub.CreateNode(e.ctx, hub.NodeSpec{Name: "blog", Source: feed, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if got := chatSay(t, e, alice, "subscribe "+feed); !strings.Contains(got, `Subscribed to "blog"`) {
		t.Errorf("subscribe by the feed's URL answered %q", got)
	}
	if got := chatSay(t, e, alice, "unsubscribe "+feed); !strings.Contains(got, `Unsubscribed from "blog"`) {
		t.Errorf("unsubscribe by URL answered %q", got)
	}

	// With open sources a new feed gets a node named after it.
	e.stop()
	e.startComponentWith(func(cfg *Config) { cfg.OpenSources = true })
	const other = "http://127.0.0.1:9/other/feed.xml"
	if got := chatSay(t, e, alice, "subscribe "+other); !strings.Contains(got, `Subscribed to "`+other+`"`) {
		t.Errorf("open pingd answered %q", got)
	}
	n, err := e.hub.Node(e.ctx, other)
	if err != nil || n.SourceURL != other || n.AccessModel != hub.AccessOpen {
		t.Fatalf("node for the URL: %+v, %v", n, err)
	}
	if got := chatSay(t, e, alice, "subscribe ftp://127.0.0.1/x"); !strings.Contains(got, `no node called`) {
		t.Errorf("a non-web URL answered %q", got)
	}
}

func TestPresence(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	alice := e.dial("alice", "roster")
	waitPresence := func(c *testenv.Client, typ string) *element {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case raw := <-c.Stanzas:
				el, err := parseDocument(raw)
				if err == nil && el.Name.Local == "presence" && el.attr("type") == typ &&
					strings.HasPrefix(el.attr("from"), e.p.ComponentDomain) {
					return el
				}
			case <-timeout:
				t.Fatalf("%s: no presence of type %q from the component", c.JID, typ)
				return nil
			}
		}
	}
	rosterItem := func() *element {
		t.Helper()
		q := result(t, e.requestTo(alice, alice.JID.Bare().String(), "get", `<query xmlns="jabber:iq:roster"/>`))
		for _, it := range find(q, "query").childrenNamed("jabber:iq:roster", "item") {
			if it.attr("jid") == e.p.ComponentDomain {
				return it
			}
		}
		return nil
	}
	rosterItem() // a client that asked for its roster is told of subscription changes
	if _, err := alice.SendRaw(e.ctx, fmt.Sprintf(`<presence type="subscribe" to=%q/>`, e.p.ComponentDomain)); err != nil {
		t.Fatal(err)
	}
	waitPresence(alice, "subscribed")
	if av := waitPresence(alice, ""); !strings.Contains(bodyOfStatus(av), "help") {
		t.Errorf("available presence %s", av.standalone())
	}
	// And from a full JID, which clients such as Gajim need to show pingd
	// online; chat to that JID reaches the service.
	full := e.p.ComponentDomain + "/pingd"
	if av := waitPresence(alice, ""); av.attr("from") != full || !strings.Contains(bodyOfStatus(av), "help") {
		t.Errorf("second available presence %s, want one from %s", av.standalone(), full)
	}
	var hb xmlBuf
	hb.open("message", "type", "chat", "to", full).element("body", "help").close("message")
	if _, err := alice.SendRaw(e.ctx, hb.String()); err != nil {
		t.Fatal(err)
	}
	if ans := nextMessage(t, alice, 10*time.Second, func(el *element) bool { return el.attr("type") == "chat" }); !strings.Contains(bodyOf(ans), "subscribe NODE") {
		t.Errorf("help to %s answered %s", full, ans.standalone())
	}
	if it := rosterItem(); it == nil || it.attr("subscription") != "to" {
		t.Fatalf("after the approval alice's roster has %v", it)
	}
	// A new session of alice: the server probes the component, which
	// answers with its presence.
	phone := e.dial("alice", "phone")
	waitPresence(phone, "")
	if av := waitPresence(phone, ""); av.attr("from") != full {
		t.Errorf("the probe's second answer %s, want one from %s", av.standalone(), full)
	}

	if _, err := alice.SendRaw(e.ctx, fmt.Sprintf(`<presence type="unsubscribe" to=%q/>`, e.p.ComponentDomain)); err != nil {
		t.Fatal(err)
	}
	waitPresence(alice, "unavailable")
	if un := waitPresence(alice, "unavailable"); un.attr("from") != full {
		t.Errorf("second unavailable presence %s, want one from %s", un.standalone(), full)
	}
	if it := rosterItem(); it != nil && it.attr("subscription") != "none" {
		t.Errorf("after unsubscribing alice's roster has subscription %q", it.attr("subscription"))
	}
}

func bodyOfStatus(p *element) string {
	if s := p.child(p.Name.Space, "status"); s != nil {
		return s.text()
	}
	return ""
}
