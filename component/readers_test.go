package component

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// Tests of what readers on plain Jabber clients get: plain messages,
// bursts as one message, options kept when subscribing again.

// publishMany publishes entries n1 … nk of a node in one append, as one
// fetch of a feed brings them.
func (e *env) publishMany(node, prefix string, k int) {
	e.t.Helper()
	ids := make([]string, k)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	e.publish(node, ids...)
}

// TestBurstIsOneMessage: a reader of plain messages gets the entries of
// one append beyond the burst threshold as one message listing them; a
// few entries come one by one; pubsub subscribers get one event each.
func TestBurstIsOneMessage(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("demo", "Demo feed", hub.AccessOpen)
	alice := e.dial("alice", "reader")
	bob := e.dial("bob", "pubsub")
	if got := chatSay(t, e, alice, "subscribe demo"); !strings.Contains(got, `Subscribed to "demo"`) {
		t.Fatalf("subscribe answered %q", got)
	}
	result(t, e.request(bob, "set", subscribePayload("demo", bob.JID.String())))

	e.publishMany("demo", "b", 30)
	msg := nextMessage(t, alice, 10*time.Second, isPlain)
	body := bodyOf(msg)
	if !strings.Contains(body, "[Demo feed] 30 new entries") {
		t.Errorf("burst message %q", body)
	}
	for i := 1; i <= 30; i++ {
		for _, want := range []string{fmt.Sprintf("Title b%d\n", i), fmt.Sprintf("http://example.org/b%d", i)} {
			if !strings.Contains(body+"\n", want) {
				t.Errorf("burst message lacks %q:\n%s", want, body)
			}
		}
	}
	noNotifications(t, alice, 500*time.Millisecond) // one message, not 30
	if got := collectItems(t, bob, "demo", 30); len(got) != 30 {
		t.Errorf("the pubsub subscriber got %d items", len(got))
	}

	// A few entries at once (up to the threshold) come one by one, with
	// their links.
	e.publishMany("demo", "f", burstThreshold)
	for i := 1; i <= burstThreshold; i++ {
		m := nextMessage(t, alice, 10*time.Second, isPlain)
		if want := fmt.Sprintf("Title f%d", i); !strings.Contains(bodyOf(m), want) || oobURL(m) != fmt.Sprintf("http://example.org/f%d", i) {
			t.Errorf("message %d: %s, want %s alone", i, m.standalone(), want)
		}
	}
	noNotifications(t, alice, 300*time.Millisecond)

	// A burst larger than one message holds is several, each saying which
	// entries it lists.
	e.publishMany("demo", "m", maxBurstEntries+5)
	first := bodyOf(nextMessage(t, alice, 10*time.Second, isPlain))
	second := bodyOf(nextMessage(t, alice, 10*time.Second, isPlain))
	if !strings.Contains(first, fmt.Sprintf("%d new entries (1 to %d)", maxBurstEntries+5, maxBurstEntries)) ||
		!strings.Contains(second, fmt.Sprintf("(%d to %d)", maxBurstEntries+1, maxBurstEntries+5)) ||
		!strings.Contains(second, fmt.Sprintf("Title m%d\n", maxBurstEntries+1)) {
		t.Errorf("a burst of %d: %q then %q", maxBurstEntries+5, first, second)
	}
}

func TestBurstRoles(t *testing.T) {
	at := func(sec int) time.Time { return time.Unix(int64(sec), 0) }
	var events []hub.Event
	add := func(kind hub.EventKind, created time.Time, n int) {
		for range n {
			events = append(events, hub.Event{Kind: kind, ItemID: fmt.Sprint(len(events)), Created: created})
		}
	}
	add(hub.EventItem, at(1), burstThreshold)    // 0-2: on their own
	add(hub.EventItem, at(2), burstThreshold+1)  // 3-6: one burst
	add(hub.EventRetract, at(3), 1)              // 7
	add(hub.EventItem, at(4), maxBurstEntries+2) // 8-59: two chunks
	roles := burstRoles(events, stanzaBudget)
	for i := range 3 {
		if roles[i].in || roles[i].entries != nil {
			t.Errorf("event %d of a small append: %+v", i, roles[i])
		}
	}
	if r := roles[3]; !r.in || len(r.entries) != burstThreshold+1 || r.total != burstThreshold+1 || r.from != 0 {
		t.Errorf("burst start: %+v", r)
	}
	for i := 4; i <= 6; i++ {
		if !roles[i].in || roles[i].entries != nil {
			t.Errorf("event %d inside a burst: %+v", i, roles[i])
		}
	}
	if roles[7].in {
		t.Errorf("a retraction is in a burst")
	}
	if r := roles[8]; len(r.entries) != maxBurstEntries || r.total != maxBurstEntries+2 {
		t.Errorf("first chunk: %d entries of %d", len(r.entries), r.total)
	}
	if r := roles[8+maxBurstEntries]; len(r.entries) != 2 || r.from != maxBurstEntries {
		t.Errorf("second chunk: %d entries from %d", len(r.entries), r.from)
	}
}

func TestRoundEnd(t *testing.T) {
	at := func(sec int) time.Time { return time.Unix(int64(sec), 0) }
	// Appends of 3, 4 and 2 events.
	var events []hub.Event
	for i, n := range []int{3, 4, 2} {
		for range n {
			events = append(events, hub.Event{Created: at(i)})
		}
	}
	for _, c := range []struct {
		end  int
		more bool
		want int
	}{
		{9, false, 9}, // the whole read, and the log ends there
		{3, false, 3}, // a cut between two appends stays
		{5, false, 3}, // inside the second append: back to its start
		{2, false, 3}, // inside the first: forward to its end
		{9, true, 7},  // the log may go on: the last append may be cut by the read
		{1, true, 3},
	} {
		if got := roundEnd(events, c.end, c.more); got != c.want {
			t.Errorf("roundEnd(end %d, more %v) = %d, want %d", c.end, c.more, got, c.want)
		}
	}
	// One append filling the whole read is sent as it is.
	one := make([]hub.Event, 5)
	if got := roundEnd(one, 5, true); got != 5 {
		t.Errorf("one append filling the read: %d", got)
	}
}

// TestSubscribingAgainKeepsOptions: options chosen with the ad-hoc command
// or XEP-0060 stay when the reader subscribes again by chat.
func TestSubscribingAgainKeepsOptions(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	n := e.createNode("demo", "Demo feed", hub.AccessOpen)
	alice := e.dial("alice", "keep")
	options := func() hub.Options {
		t.Helper()
		subs, err := e.hub.Subscriptions(e.ctx, hub.SubscriptionFilter{NodeID: n.ID, Kind: hub.KindXMPP})
		if err != nil || len(subs) != 1 {
			t.Fatalf("subscriptions %+v, %v", subs, err)
		}
		return subs[0].Options
	}
	// A chat subscription: plain messages of type chat.
	chatSay(t, e, alice, "subscribe demo")
	if o := options(); o.Format != hub.FormatMessage || hub.MessageTypeOf(n, o) != hub.NotifyChat {
		t.Fatalf("a chat subscription has options %+v", o)
	}
	// The reader chooses normal messages with the ad-hoc command …
	note := completedNote(t, command(t, e, alice, "pingd#subscribe", "complete", "s1",
		submitFields(map[string]string{"target": "demo", fieldMessageType: hub.NotifyNormal})), "info")
	if !strings.Contains(note, "settings are updated") {
		t.Errorf("ad-hoc subscribe again: %q", note)
	}
	// … and subscribing by chat again keeps them.
	if got := chatSay(t, e, alice, "subscribe demo"); !strings.Contains(got, "already subscribed") || strings.Contains(got, "updated") {
		t.Errorf("subscribing again by chat answered %q", got)
	}
	if o := options(); o.Format != hub.FormatMessage || o.MessageType != hub.NotifyNormal {
		t.Errorf("after subscribing again by chat the options are %+v, want the normal messages chosen before", o)
	}
	e.publish("demo", "k1")
	if m := nextMessage(t, alice, 10*time.Second, isPlain); m.attr("type") != hub.NotifyNormal {
		t.Errorf("notification %s, want type normal", m.standalone())
	}
	// The ad-hoc form offers the format: pubsub events with a body.
	completedNote(t, command(t, e, alice, "pingd#subscribe", "complete", "s2",
		submitFields(map[string]string{"target": "demo", fieldFormat: hub.FormatPubsub, fieldMessageType: hub.NotifyHeadline, fieldIncludeBody: "1"})), "info")
	chatSay(t, e, alice, "subscribe demo")
	e.publish("demo", "k2")
	if m := nextMessage(t, alice, 10*time.Second, isNotification); !isEvent(m) || m.attr("type") != hub.NotifyHeadline || !strings.Contains(bodyOf(m), "Title k2") {
		t.Errorf("after choosing pubsub events: %s", m.standalone())
	}
	// XEP-0060 options can choose plain messages too.
	opts := result(t, e.request(alice, "get", fmt.Sprintf(`<pubsub xmlns=%q><options node="demo" jid=%q/></pubsub>`, nsPubsub, alice.JID.Bare())))
	if f, serr := parseForm(find(opts, "pubsub", "options", "x")); serr != nil || len(f.Values[fieldFormat]) != 1 || f.Values[fieldFormat][0] != hub.FormatPubsub {
		t.Errorf("options form %s", opts.standalone())
	}
	result(t, e.request(alice, "set", fmt.Sprintf(`<pubsub xmlns=%q><options node="demo" jid=%q><x xmlns="jabber:x:data" type="submit">`+
		`<field var="FORM_TYPE" type="hidden"><value>%s</value></field><field var="%s"><value>message</value></field>`+
		`<field var="%s"><value>chat</value></field></x></options></pubsub>`, nsPubsub, alice.JID.Bare(), formSubscribeOptions, fieldFormat, fieldMessageType)))
	e.publish("demo", "k3")
	if m := nextMessage(t, alice, 10*time.Second, isNotification); isEvent(m) || m.attr("type") != hub.NotifyChat || oobURL(m) != "http://example.org/k3" {
		t.Errorf("after choosing plain messages over XEP-0060: %s", m.standalone())
	}
	stanzaErr(t, e.request(alice, "set", fmt.Sprintf(`<pubsub xmlns=%q><options node="demo" jid=%q><x xmlns="jabber:x:data" type="submit">`+
		`<field var="%s"><value>smoke-signals</value></field></x></options></pubsub>`, nsPubsub, alice.JID.Bare(), fieldFormat)), "modify", "bad-request", "invalid-options")

	// Deleting the node tells a reader of plain messages in words.
	if err := e.hub.DeleteNode(e.ctx, "demo"); err != nil {
		t.Fatal(err)
	}
	if m := nextMessage(t, alice, 10*time.Second, isNotification); isEvent(m) || !strings.Contains(bodyOf(m), "was deleted") {
		t.Errorf("delete notification to a reader: %s", m.standalone())
	}
}

// TestLastItemOnSubscribe: a new subscription gets the node's newest
// item at once, after the answer (XEP-0060 §12.5, on_sub by default); a
// subscription returned again does not; an owner can say never, and
// on_sub_and_presence is refused.
func TestLastItemOnSubscribe(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("demo", "Demo feed", hub.AccessOpen)
	e.createNode("empty", "", hub.AccessOpen)
	e.publish("demo", "l1", "l2")
	alice := e.dial("alice", "last")
	bob := e.dial("bob", "last")
	admin := e.dial("admin", "last")

	// By chat: the answer says the newest entry follows, and it does, as
	// a plain message stamped with its time.
	say := func(c *testenv.Client, body string) {
		t.Helper()
		var b xmlBuf
		b.open("message", "type", "chat", "to", e.p.ComponentDomain).element("body", body).close("message")
		if _, err := c.SendRaw(e.ctx, b.String()); err != nil {
			t.Fatal(err)
		}
	}
	say(alice, "subscribe demo")
	first := nextMessage(t, alice, 10*time.Second, func(el *element) bool { return el.attr("type") == "chat" })
	if isNotification(first) || !strings.Contains(bodyOf(first), "newest entry follows") {
		t.Fatalf("the first message after subscribing is %s, want the answer saying the newest entry follows", first.standalone())
	}
	last := nextMessage(t, alice, 10*time.Second, isPlain)
	// Without an XEP-0203 delay, which would have a client that sorts by
	// it (Dino) show the entry above the command; its date is in words.
	if !strings.Contains(bodyOf(last), "Title l2") || oobURL(last) != "http://example.org/l2" ||
		last.child(nsDelay, "delay") != nil || last.attr("type") != hub.NotifyChat || !strings.Contains(bodyOf(last), "(Published ") {
		t.Errorf("the newest entry came as %s, want a chat message without a delay, its date in the body", last.standalone())
	}
	// Subscribing again returns the subscription, and nothing is resent.
	if got := chatSay(t, e, alice, "subscribe demo"); !strings.Contains(got, "already subscribed") {
		t.Errorf("subscribe again: %q", got)
	}
	noNotifications(t, alice, 500*time.Millisecond)
	// A node without items: the answer says so.
	if got := chatSay(t, e, alice, "subscribe empty"); !strings.Contains(got, "no entry yet") {
		t.Errorf("subscribe to an empty node: %q", got)
	}

	// Over XEP-0060: the IQ result first, then the event with a delay.
	// Sent without waiting for the answer, so it arrives among the
	// messages in the order the server routed them.
	sendNoWait(t, e.ctx, bob, fmt.Sprintf(`<iq type="set" id="sub-last" to=%q>%s</iq>`, e.p.ComponentDomain,
		subscribePayload("demo", bob.JID.String())))
	var order []string
	for len(order) < 2 {
		select {
		case raw := <-bob.Stanzas:
			el, err := parseDocument(raw)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case el.Name.Local == "iq" && el.attr("id") == "sub-last":
				order = append(order, "result")
			case el.Name.Local == "message" && isEvent(el):
				order = append(order, "event")
				if it := itemsOf(t, &event{msg: el, ev: el.child(nsPubsubEvent, "event")}, "demo"); len(it) != 1 || it[0].id != "l2" ||
					el.child(nsDelay, "delay") == nil {
					t.Errorf("the last item event: %s", el.standalone())
				}
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("bob got %v", order)
		}
	}
	if order[0] != "result" {
		t.Errorf("bob got %v, want the subscription's result before the item", order)
	}
	result(t, e.request(bob, "set", subscribePayload("demo", bob.JID.String())))
	noEvents(t, bob, 500*time.Millisecond)

	// The owner's configuration: never, and on_sub_and_presence refused.
	configure := func(value string) *element {
		return e.request(admin, "set", fmt.Sprintf(`<pubsub xmlns=%q><configure node="demo"><x xmlns="jabber:x:data" type="submit">`+
			`<field var="FORM_TYPE" type="hidden"><value>%s</value></field><field var=%q><value>%s</value></field>`+
			`</x></configure></pubsub>`, nsPubsubOwner, formNodeConfig, fieldSendLastItem, value))
	}
	cfg := result(t, e.request(admin, "get", fmt.Sprintf(`<pubsub xmlns=%q><configure node="demo"/></pubsub>`, nsPubsubOwner)))
	if f, serr := parseForm(find(cfg, "pubsub", "configure", "x")); serr != nil || len(f.Values[fieldSendLastItem]) != 1 || f.Values[fieldSendLastItem][0] != hub.SendLastOnSub {
		t.Errorf("configuration form %s", cfg.standalone())
	}
	if el := stanzaErr(t, configure(hub.SendLastOnSubAndPresence), "modify", "not-acceptable", ""); !strings.Contains(string(el.standalone()), "presence") {
		t.Errorf("on_sub_and_presence refused without saying why: %s", el.standalone())
	}
	result(t, configure(hub.SendLastNever))
	if n, _ := e.hub.Node(e.ctx, "demo"); n.SendLastPublished != hub.SendLastNever {
		t.Fatalf("send_last_published_item is %q after configuring never", n.SendLastPublished)
	}
	result(t, e.request(admin, "set", subscribePayload("demo", admin.JID.String())))
	noEvents(t, admin, 500*time.Millisecond)
	result(t, configure(hub.SendLastOnSub))

	// An owner subscribing someone: told, and sent the newest item.
	e.p.Register("carol", password)
	carol := e.dial("carol", "granted")
	result(t, e.request(admin, "set", fmt.Sprintf(`<pubsub xmlns=%q><subscriptions node="demo">`+
		`<subscription jid=%q subscription="subscribed"/></subscriptions></pubsub>`, nsPubsubOwner, carol.JID.Bare())))
	var kinds []string
	for len(kinds) < 2 {
		ev := nextEvent(t, carol, 10*time.Second)
		switch {
		case ev.ev.child(nsPubsubEvent, "subscription") != nil:
			kinds = append(kinds, "subscription")
		case ev.ev.child(nsPubsubEvent, "items") != nil:
			kinds = append(kinds, "item "+itemsOf(t, ev, "demo")[0].id)
		}
	}
	if kinds[0] != "subscription" || kinds[1] != "item l2" {
		t.Errorf("an owner's grant told carol %v", kinds)
	}
}

// TestRevokeTellsReaders: a reader of plain messages whose subscription
// is ended (by the XEP-0060 owner form, leaving the whitelist by the
// ad-hoc command, the node made whitelist-only, or a GetPingd unsubscribe
// request, which the subscriber may send itself) gets, after the XEP-0060
// event, a plain message saying so in words true on every path, which
// every client shows; an XEP-0060 subscriber gets the event alone.
func TestRevokeTellsReaders(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	node := e.createNode("demo", "Demo feed", hub.AccessOpen)
	alice := e.dial("alice", "reader")
	bob := e.dial("bob", "pubsub")
	admin := e.dial("admin", "owner")
	aliceBare, bobFull := alice.JID.Bare().String(), bob.JID.String()
	subscribeBoth := func() {
		t.Helper()
		if got := chatSay(t, e, alice, "subscribe demo"); !strings.Contains(got, `Subscribed to "demo"`) {
			t.Fatalf("subscribe answered %q", got)
		}
		result(t, e.request(bob, "set", subscribePayload("demo", bobFull)))
	}
	// told checks what each of them gets: alice the event and then the
	// message in words, of type chat; bob the event, and nothing more.
	told := func(how string) {
		t.Helper()
		ev := nextMessage(t, alice, 10*time.Second, isNotification)
		if sub := find(ev, "event", "subscription"); sub == nil || sub.attr("subscription") != "none" || sub.attr("jid") != aliceBare || bodyOf(ev) != "" {
			t.Errorf("%s: the reader's first notification %s, want the XEP-0060 event alone", how, ev.standalone())
		}
		words := nextMessage(t, alice, 10*time.Second, isNotification)
		if isEvent(words) || words.attr("type") != hub.NotifyChat ||
			bodyOf(words) != "[Demo feed] Your subscription to this node has ended: nothing more will come from it." {
			t.Errorf("%s: the reader was told %s, want a plain chat message saying its subscription was ended", how, words.standalone())
		}
		if words.attr("id") != ev.attr("id") {
			t.Errorf("%s: the message's id %q is not the event's %q: one id per event", how, words.attr("id"), ev.attr("id"))
		}
		got := nextMessage(t, bob, 10*time.Second, isNotification)
		sub := find(got, "event", "subscription")
		if sub == nil || len(got.Children) != 1 || got.attr("type") != hub.NotifyHeadline ||
			sub.attr("subscription") != "none" || sub.attr("jid") != bobFull || sub.attr("node") != "demo" {
			t.Errorf("%s: the XEP-0060 subscriber got %s, want the subscription event alone", how, got.standalone())
		}
		noNotifications(t, alice, 300*time.Millisecond)
		noNotifications(t, bob, 300*time.Millisecond)
	}

	// The owner's XEP-0060 form ends both subscriptions.
	subscribeBoth()
	result(t, e.request(admin, "set", fmt.Sprintf(`<pubsub xmlns=%q><subscriptions node="demo">`+
		`<subscription jid=%q subscription="none"/><subscription jid=%q subscription="none"/></subscriptions></pubsub>`,
		nsPubsubOwner, aliceBare, bobFull)))
	told("the owner form")

	// The node made whitelist-only, as the admin API and every other
	// entry point do it.
	subscribeBoth()
	cfg := node.NodeConfig
	cfg.AccessModel = hub.AccessWhitelist
	if err := e.hub.ConfigureNode(e.ctx, "demo", cfg); err != nil {
		t.Fatal(err)
	}
	told("whitelist-only")

	// Members taken off the whitelist by the ad-hoc command.
	for _, j := range []string{aliceBare, bob.JID.Bare().String()} {
		completedNote(t, command(t, e, admin, "pingd#whitelist-add", "complete", "a-"+j, submitFields(map[string]string{"node": "demo", "jid": j})), "info")
	}
	subscribeBoth()
	for _, j := range []string{aliceBare, bob.JID.Bare().String()} {
		completedNote(t, command(t, e, admin, "pingd#whitelist-remove", "complete", "r-"+j, submitFields(map[string]string{"node": "demo", "jid": j})), "info")
	}
	told("the ad-hoc command")

	// A GetPingd <unsubscribe> of each, as whitelist.Service.Remove
	// carries it out: no owner need be involved.
	for _, j := range []string{aliceBare, bob.JID.Bare().String()} {
		completedNote(t, command(t, e, admin, "pingd#whitelist-add", "complete", "b-"+j, submitFields(map[string]string{"node": "demo", "jid": j})), "info")
	}
	subscribeBoth()
	current, err := e.hub.Node(e.ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []string{aliceBare, bob.JID.Bare().String()} {
		if err := e.hub.RevokeSubscriptions(e.ctx, current, j); err != nil {
			t.Fatal(err)
		}
	}
	told("a GetPingd unsubscribe")
}
