package component

import (
	"testing"

	"github.com/pingd/pingd/hub"
)

// FuzzParseIQ feeds arbitrary stanzas to the request parser: it must never
// panic, must answer every get and set with a request or a stanza error,
// and whatever it accepts as a payload must serialise to XML that parses
// back to the same tree.
func FuzzParseIQ(f *testing.F) {
	for _, s := range []string{
		iq("set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><subscribe node="n" jid="a@localhost"/></pubsub>`),
		iq("set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><publish node="n"><item id="1"><entry xmlns="http://www.w3.org/2005/Atom"><title>t</title></entry></item></publish></pubsub>`),
		iq("get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><items node="n" max_items="2"><item id="1"/></items></pubsub>`),
		iq("set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><affiliations node="n"><affiliation jid="b@localhost" affiliation="member"/></affiliations></pubsub>`),
		iq("set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><configure node="n"><x xmlns="jabber:x:data" type="submit"><field var="pubsub#max_items"><value>3</value></field></x></configure></pubsub>`),
		iq("get", `<query xmlns="http://jabber.org/protocol/disco#info" node="n"/>`),
		iq("get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"/>`),
		iq("set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><options node="n" jid="a@localhost"><x xmlns="jabber:x:data" type="submit"><field var="pubsub#include_body"><value>1</value></field><field var="x-pingd#message_type"><value>chat</value></field></x></options></pubsub>`),
		iq("set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><subscribe node="n" jid="a@localhost"/><options><x xmlns="jabber:x:data" type="submit"/></options></pubsub>`),
		iq("set", `<command xmlns="http://jabber.org/protocol/commands" node="pingd#subscribe" action="complete" sessionid="s"><x xmlns="jabber:x:data" type="submit"><field var="target"><value>demo</value></field></x></command>`),
		iq("set", `<command xmlns="http://jabber.org/protocol/commands" node="pingd#list"/>`),
		iq("get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><items node="n"/><set xmlns="http://jabber.org/protocol/rsm"><max>2</max><after>b</after></set></pubsub>`),
		iq("get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><items node="n"/><set xmlns="http://jabber.org/protocol/rsm"><max>2</max><before/><index>1</index></set></pubsub>`),
		iq("set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><options node="n" jid="a@localhost"><x xmlns="jabber:x:data" type="submit"><field var="pubsub#digest"><value>1</value></field><field var="pubsub#digest_frequency"><value>60000</value></field><field var="x-pingd#format"><value>message</value></field></x></options></pubsub>`),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		el, err := parseDocument(data)
		if err != nil {
			return
		}
		again, err := parseDocument(el.standalone())
		if err != nil {
			t.Fatalf("serialised tree does not parse: %v\n%s", err, el.standalone())
		}
		if !sameTree(el, again) {
			t.Fatalf("round trip changed the tree:\n%s\n%s", data, el.standalone())
		}
		req, serr := parseIQ(el)
		if (req == nil) == (serr == nil) {
			t.Fatalf("parseIQ gave request %v and error %v; want exactly one", req, serr)
		}
		if serr != nil {
			if serr.Condition == "" || serr.Type == "" {
				t.Fatalf("error without condition or type: %+v", serr)
			}
			var b xmlBuf
			serr.write(&b, "pubsub.localhost")
			if _, err := parseDocument(b.Bytes()); err != nil {
				t.Fatalf("error element does not parse: %v\n%s", err, b.String())
			}
			return
		}
		switch req.Op {
		case opPublish:
			e := entryFromPayload(req.Item.ID, req.Item.Payload)
			if _, err := parseDocument(e.Payload); err != nil {
				t.Fatalf("stored payload does not parse: %v\n%s", err, e.Payload)
			}
		case opConfigureSet:
			if f, serr := parseForm(req.Form); serr == nil {
				checkConfig(t, f)
			}
		case opOptionsSet, opSubscribe:
			if req.Form != nil {
				if opts, serr := applySubOptionsForm(hub.Options{}, req.Form); serr == nil {
					if !hub.ValidMessageType(opts.MessageType) || !hub.ValidFormat(opts.Format) || !hub.ValidXMPPDiff(opts.Diff) {
						t.Fatalf("accepted message type %q, format %q, diff %q", opts.MessageType, opts.Format, opts.Diff)
					}
					if f := opts.DigestFrequency(); f < hub.MinDigestFrequency || f > hub.MaxDigestFrequency {
						t.Fatalf("accepted a digest frequency of %s", f)
					}
				}
			}
		case opItems:
			if req.Page != nil {
				all := []hub.Event{{ItemID: "a"}, {ItemID: "b"}, {ItemID: "c"}}
				if page, first, serr := pageOf(all, req.Page); serr == nil &&
					(first < 0 || first > len(all) || len(page) > len(all) || (req.Page.Max >= 0 && len(page) > req.Page.Max)) {
					t.Fatalf("page %v from %d for %+v", page, first, req.Page)
				}
			}
		case opCommand:
			if req.Command == nil || req.Node == "" {
				t.Fatalf("command request without its parts: %+v", req)
			}
		case opCreate:
			if cfg, serr := configFromRequest(req.Configure); serr == nil {
				if err := cfg.Validate(); err != nil {
					t.Fatalf("accepted an invalid configuration %+v: %v", cfg, err)
				}
			}
		}
	})
}

// FuzzConfigForm feeds arbitrary data forms to the node configuration
// parser: whatever it accepts is a valid configuration that survives a
// render and re-submit unchanged.
func FuzzConfigForm(f *testing.F) {
	f.Add([]byte(submitForm("pubsub#title", "T", "pubsub#access_model", "whitelist", "pubsub#max_items", "10",
		"pubsub#deliver_payloads", "0", "pubsub#notification_type", "normal")))
	f.Add([]byte(submitForm("pubsub#max_items", "max")))
	f.Add([]byte(`<x xmlns="jabber:x:data" type="cancel"/>`))
	f.Add([]byte(`<x xmlns="jabber:x:data" type="submit"><field var="pubsub#title"><value>a</value><value>b</value></field></x>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		el, err := parseDocument(data)
		if err != nil {
			return
		}
		form, serr := parseForm(el)
		if serr != nil {
			return
		}
		checkConfig(t, form)
	})
}

func checkConfig(t *testing.T, form *submittedForm) {
	t.Helper()
	cfg, serr := applyConfigForm(hub.DefaultNodeConfig(), form)
	if serr != nil {
		return
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("accepted an invalid configuration %+v: %v", cfg, err)
	}
	el, err := parseDocument(formBytes(configForm(cfg)))
	if err != nil {
		t.Fatalf("rendered form does not parse: %v", err)
	}
	back, serr := parseForm(el)
	if serr != nil {
		t.Fatalf("rendered form refused: %v", serr)
	}
	again, serr := applyConfigForm(hub.DefaultNodeConfig(), back)
	if serr != nil {
		t.Fatalf("re-submitted form refused: %v", serr)
	}
	// Titles are single-line in a form; whitespace at the ends may go.
	if again.AccessModel != cfg.AccessModel || again.MaxItems != cfg.MaxItems ||
		again.DeliverPayloads != cfg.DeliverPayloads || again.NotificationType != cfg.NotificationType {
		t.Fatalf("render and re-submit changed %+v into %+v", cfg, again)
	}
}

// FuzzChatCommand checks that any chat body parses into a known command.
func FuzzChatCommand(f *testing.F) {
	for _, s := range []string{"help", "nodes", "list", "subscribe demo", "unsubscribe demo", "last demo 3", "last", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		cmd := parseChatCommand(body)
		switch cmd.Name {
		case "help", "nodes", "list", "subscribe", "unsubscribe", "last":
		case "unknown":
			if cmd.Word == "" {
				t.Fatalf("parseChatCommand(%q): unknown without the word", body)
			}
		default:
			t.Fatalf("parseChatCommand(%q) gave unknown command %q", body, cmd.Name)
		}
	})
}

// FuzzMulticastStanzas feeds arbitrary server stanzas to what reads the
// XEP-0033 service's answers: the disco#info features and limit, and a
// bounced multicast notification. Nothing may panic; a limit is -1 or a
// count; what is sent again must be well-formed messages, one per address
// counted, each addressed and carrying the event.
func FuzzMulticastStanzas(f *testing.F) {
	for _, s := range []string{
		discoInfoWithLimit("infinite"),
		discoInfoWithLimit("20"),
		discoInfoWithLimit(""),
		`<message xmlns="jabber:component:accept" type="error" from="multicast.localhost" to="pubsub.localhost">` +
			`<addresses xmlns="http://jabber.org/protocol/address"><address type="bcc" jid="a@localhost/r"/><address type="bcc" jid="b@localhost"/></addresses>` +
			`<event xmlns="http://jabber.org/protocol/pubsub#event"><items node="n"><item id="1"><entry xmlns="http://www.w3.org/2005/Atom"><title>t</title></entry></item></items></event>` +
			`<error type="modify"><not-acceptable xmlns="urn:ietf:params:xml:ns:xmpp-stanzas"/><text xmlns="urn:ietf:params:xml:ns:xmpp-stanzas">Too many receiver fields were specified</text></error></message>`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		el, err := parseDocument(data)
		if err != nil {
			return
		}
		hasFeature(el, nsAddress)
		if limit, announced := multicastLimit(el); limit < -1 || (!announced && limit != 0) {
			t.Fatalf("limit %d, announced %v", limit, announced)
		}
		_ = errorText(el)
		_ = eventNode(el.child(nsPubsubEvent, "event"))
		out, count := renderBounced(el, func(string) string { return hub.NotifyHeadline }, "pubsub.localhost")
		if count == 0 {
			if len(out) != 0 {
				t.Fatalf("output without a count: %s", out)
			}
			return
		}
		wrapped, err := parseDocument(append(append([]byte("<r>"), out...), "</r>"...))
		if err != nil {
			t.Fatalf("resent notifications do not parse: %v\n%s", err, out)
		}
		msgs := wrapped.childrenNamed("", "message")
		if len(msgs) != count {
			t.Fatalf("%d messages for a count of %d:\n%s", len(msgs), count, out)
		}
		for _, m := range msgs {
			if m.attr("to") == "" || m.attr("from") != "pubsub.localhost" || len(m.Children) == 0 || m.child(nsAddress, "addresses") != nil {
				t.Fatalf("resent notification %s", m.standalone())
			}
		}
	})
}
