package component

import (
	"bytes"
	"encoding/xml"
	"errors"
	"strings"
	"testing"

	"mellium.im/xmpp/stanza"

	"github.com/pingd/pingd/hub"
)

func mustParse(t testing.TB, s string) *element {
	t.Helper()
	el, err := parseDocument([]byte(s))
	if err != nil {
		t.Fatalf("parse %s: %v", s, err)
	}
	return el
}

func iq(typ, payload string) string {
	return `<iq xmlns="jabber:component:accept" type="` + typ + `" id="x" from="a@localhost/r" to="pubsub.localhost">` + payload + `</iq>`
}

func TestParseIQErrors(t *testing.T) {
	const ps = `xmlns="http://jabber.org/protocol/pubsub"`
	const own = `xmlns="http://jabber.org/protocol/pubsub#owner"`
	cases := []struct {
		name    string
		stanza  string
		cond    stanza.Condition
		app     string
		feature string
	}{
		{"no payload", iq("get", ""), stanza.BadRequest, "", ""},
		{"two payloads", iq("get", `<query xmlns="http://jabber.org/protocol/disco#info"/><query xmlns="http://jabber.org/protocol/disco#items"/>`), stanza.BadRequest, "", ""},
		{"unknown namespace", iq("get", `<query xmlns="jabber:iq:version"/>`), stanza.ServiceUnavailable, "", ""},
		{"ping", iq("get", `<ping xmlns="urn:xmpp:ping"/>`), stanza.ServiceUnavailable, "", ""},
		{"no namespace", iq("get", `<foo xmlns=""/>`), stanza.ServiceUnavailable, "", ""},
		{"bad type", iq("frob", `<query xmlns="http://jabber.org/protocol/disco#info"/>`), stanza.BadRequest, "", ""},
		{"disco set", iq("set", `<query xmlns="http://jabber.org/protocol/disco#info"/>`), stanza.BadRequest, "", ""},
		{"empty pubsub", iq("set", `<pubsub `+ps+`/>`), stanza.BadRequest, "", ""},
		{"subscribe no node", iq("set", `<pubsub `+ps+`><subscribe jid="a@localhost"/></pubsub>`), stanza.BadRequest, "nodeid-required", ""},
		{"subscribe empty node", iq("set", `<pubsub `+ps+`><subscribe node="" jid="a@localhost"/></pubsub>`), stanza.BadRequest, "nodeid-required", ""},
		{"subscribe no jid", iq("set", `<pubsub `+ps+`><subscribe node="n"/></pubsub>`), stanza.BadRequest, "jid-required", ""},
		{"subscribe empty jid", iq("set", `<pubsub `+ps+`><subscribe node="n" jid=""/></pubsub>`), stanza.BadRequest, "jid-required", ""},
		{"unsubscribe no jid", iq("set", `<pubsub `+ps+`><unsubscribe node="n"/></pubsub>`), stanza.BadRequest, "jid-required", ""},
		{"unsubscribe bad jid", iq("set", `<pubsub `+ps+`><unsubscribe node="n" jid="@@"/></pubsub>`), stanza.BadRequest, "invalid-jid", ""},
		{"subscribe bad jid", iq("set", `<pubsub `+ps+`><subscribe node="n" jid="@@"/></pubsub>`), stanza.BadRequest, "invalid-jid", ""},
		{"subscribe as get", iq("get", `<pubsub `+ps+`><subscribe node="n" jid="a@localhost"/></pubsub>`), stanza.BadRequest, "", ""},
		{"subscribe with options but no form", iq("set", `<pubsub `+ps+`><subscribe node="n" jid="a@localhost"/><options><foo xmlns="urn:x"/></options></pubsub>`), stanza.BadRequest, "invalid-options", ""},
		{"options without jid", iq("get", `<pubsub `+ps+`><options node="n"/></pubsub>`), stanza.BadRequest, "jid-required", ""},
		{"options set without jid", iq("set", `<pubsub `+ps+`><options node="n"><x xmlns="jabber:x:data" type="submit"/></options></pubsub>`), stanza.BadRequest, "jid-required", ""},
		{"options without node", iq("get", `<pubsub `+ps+`><options jid="a@localhost"/></pubsub>`), stanza.BadRequest, "nodeid-required", ""},
		{"options set without form", iq("set", `<pubsub `+ps+`><options node="n" jid="a@localhost"/></pubsub>`), stanza.BadRequest, "invalid-options", ""},
		{"default sub set", iq("set", `<pubsub `+ps+`><default/></pubsub>`), stanza.BadRequest, "", ""},
		{"unknown verb", iq("get", `<pubsub `+ps+`><frobnicate node="n"/></pubsub>`), stanza.BadRequest, "", ""},
		{"foreign verb", iq("get", `<pubsub `+ps+`><items xmlns="urn:other" node="n"/></pubsub>`), stanza.BadRequest, "", ""},
		{"two verbs", iq("set", `<pubsub `+ps+`><subscribe node="n" jid="a@localhost"/><unsubscribe node="n" jid="a@localhost"/></pubsub>`), stanza.BadRequest, "", ""},
		{"items no node", iq("get", `<pubsub `+ps+`><items/></pubsub>`), stanza.BadRequest, "nodeid-required", ""},
		{"items bad max", iq("get", `<pubsub `+ps+`><items node="n" max_items="-1"/></pubsub>`), stanza.BadRequest, "", ""},
		{"items item without id", iq("get", `<pubsub `+ps+`><items node="n"><item/></items></pubsub>`), stanza.BadRequest, "item-required", ""},
		{"publish no node", iq("set", `<pubsub `+ps+`><publish><item><x xmlns="y"/></item></publish></pubsub>`), stanza.BadRequest, "nodeid-required", ""},
		{"publish no item", iq("set", `<pubsub `+ps+`><publish node="n"/></pubsub>`), stanza.BadRequest, "item-required", ""},
		{"publish two items", iq("set", `<pubsub `+ps+`><publish node="n"><item><a xmlns="y"/></item><item><b xmlns="y"/></item></publish></pubsub>`), stanza.BadRequest, "invalid-payload", ""},
		{"publish no payload", iq("set", `<pubsub `+ps+`><publish node="n"><item id="1"/></publish></pubsub>`), stanza.BadRequest, "payload-required", ""},
		{"publish two payloads", iq("set", `<pubsub `+ps+`><publish node="n"><item><a xmlns="y"/><b xmlns="y"/></item></publish></pubsub>`), stanza.BadRequest, "invalid-payload", ""},
		{"publish not Atom", iq("set", `<pubsub `+ps+`><publish node="n"><item><foo xmlns="urn:test"/></item></publish></pubsub>`), stanza.BadRequest, "invalid-payload", ""},
		{"publish Atom feed", iq("set", `<pubsub `+ps+`><publish node="n"><item><feed xmlns="http://www.w3.org/2005/Atom"/></item></publish></pubsub>`), stanza.BadRequest, "invalid-payload", ""},
		{"publish entry of no namespace", iq("set", `<pubsub `+ps+`><publish node="n"><item><entry xmlns=""/></item></publish></pubsub>`), stanza.BadRequest, "invalid-payload", ""},
		{"publish options of another form type", iq("set", `<pubsub `+ps+`><publish node="n"><item><entry xmlns="http://www.w3.org/2005/Atom"/></item></publish><publish-options><x xmlns="jabber:x:data" type="submit"><field var="FORM_TYPE"><value>urn:other</value></field></x></publish-options></pubsub>`), stanza.BadRequest, "", ""},
		{"publish options without a form", iq("set", `<pubsub `+ps+`><publish node="n"><item><entry xmlns="http://www.w3.org/2005/Atom"/></item></publish><publish-options><y xmlns="urn:other"/></publish-options></pubsub>`), stanza.BadRequest, "", ""},
		{"retract no item", iq("set", `<pubsub `+ps+`><retract node="n"/></pubsub>`), stanza.BadRequest, "item-required", ""},
		{"retract no id", iq("set", `<pubsub `+ps+`><retract node="n"><item/></retract></pubsub>`), stanza.BadRequest, "item-required", ""},
		{"retract no node", iq("set", `<pubsub `+ps+`><retract><item id="1"/></retract></pubsub>`), stanza.BadRequest, "nodeid-required", ""},
		{"create with configure node", iq("set", `<pubsub `+ps+`><create node="n"/><configure node="n"/></pubsub>`), stanza.BadRequest, "", ""},
		{"create empty node", iq("set", `<pubsub `+ps+`><create node=""/></pubsub>`), stanza.BadRequest, "", ""},
		{"configure in pubsub ns", iq("get", `<pubsub `+ps+`><configure node="n"/></pubsub>`), stanza.BadRequest, "", ""},
		{"owner configure no node", iq("get", `<pubsub `+own+`><configure/></pubsub>`), stanza.BadRequest, "nodeid-required", ""},
		{"owner configure set without form", iq("set", `<pubsub `+own+`><configure node="n"/></pubsub>`), stanza.BadRequest, "", ""},
		{"owner delete no node", iq("set", `<pubsub `+own+`><delete/></pubsub>`), stanza.BadRequest, "nodeid-required", ""},
		{"owner delete as get", iq("get", `<pubsub `+own+`><delete node="n"/></pubsub>`), stanza.BadRequest, "", ""},
		{"owner purge no node", iq("set", `<pubsub `+own+`><purge/></pubsub>`), stanza.BadRequest, "nodeid-required", ""},
		{"owner affiliations no node", iq("get", `<pubsub `+own+`><affiliations/></pubsub>`), stanza.BadRequest, "nodeid-required", ""},
		{"owner affiliations set empty", iq("set", `<pubsub `+own+`><affiliations node="n"/></pubsub>`), stanza.BadRequest, "", ""},
		{"owner affiliation bad jid", iq("set", `<pubsub `+own+`><affiliations node="n"><affiliation jid="" affiliation="member"/></affiliations></pubsub>`), stanza.BadRequest, "invalid-jid", ""},
		{"owner affiliation unknown", iq("set", `<pubsub `+own+`><affiliations node="n"><affiliation jid="b@localhost" affiliation="king"/></affiliations></pubsub>`), stanza.BadRequest, "", ""},
		{"owner affiliation publish-only", iq("set", `<pubsub `+own+`><affiliations node="n"><affiliation jid="b@localhost" affiliation="publish-only"/></affiliations></pubsub>`), stanza.FeatureNotImplemented, "unsupported", "publish-only-affiliation"},
		{"owner affiliation twice", iq("set", `<pubsub `+own+`><affiliations node="n"><affiliation jid="b@localhost" affiliation="member"/><affiliation jid="b@localhost/x" affiliation="none"/></affiliations></pubsub>`), stanza.BadRequest, "", ""},
		{"owner unknown verb", iq("get", `<pubsub `+own+`><frob node="n"/></pubsub>`), stanza.BadRequest, "", ""},
		{"owner two verbs", iq("set", `<pubsub `+own+`><purge node="n"/><delete node="n"/></pubsub>`), stanza.BadRequest, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, serr := parseIQ(mustParse(t, tc.stanza))
			if serr == nil {
				t.Fatalf("accepted as %v; want %s", req.Op, tc.cond)
			}
			if serr.Condition != tc.cond || serr.App != tc.app || serr.Feature != tc.feature {
				t.Fatalf("got %s (app %q feature %q); want %s (app %q feature %q)", serr.Condition, serr.App, serr.Feature, tc.cond, tc.app, tc.feature)
			}
		})
	}
}

func TestParseIQRequests(t *testing.T) {
	const ps = `xmlns="http://jabber.org/protocol/pubsub"`
	const own = `xmlns="http://jabber.org/protocol/pubsub#owner"`
	r, serr := parseIQ(mustParse(t, iq("set", `<pubsub `+ps+`><subscribe node="feeds/demo" jid="Juliet@Localhost/Balcony"/></pubsub>`)))
	if serr != nil {
		t.Fatal(serr)
	}
	if r.Op != opSubscribe || r.Node != "feeds/demo" || r.JID.String() != "juliet@localhost/Balcony" {
		t.Fatalf("subscribe parsed as %+v (jid %s); want the node and a PRECIS-normalised JID", r, r.JID)
	}

	r, serr = parseIQ(mustParse(t, iq("get", `<pubsub `+ps+`><items node="n" max_items="3"><item id="a"/><item id="b"/></items></pubsub>`)))
	if serr != nil {
		t.Fatal(serr)
	}
	if r.Op != opItems || r.MaxItems != 3 || strings.Join(r.ItemIDs, ",") != "a,b" {
		t.Fatalf("items parsed as %+v", r)
	}

	r, serr = parseIQ(mustParse(t, iq("set", `<pubsub `+ps+`><publish node="n"><item id="i1"><entry xmlns="http://www.w3.org/2005/Atom"><title>T</title></entry></item></publish></pubsub>`)))
	if serr != nil {
		t.Fatal(serr)
	}
	if r.Op != opPublish || r.Item.ID != "i1" || r.Item.Payload.Name.Local != "entry" {
		t.Fatalf("publish parsed as %+v", r)
	}

	r, serr = parseIQ(mustParse(t, iq("set", `<pubsub `+ps+`><create/><configure/></pubsub>`)))
	if serr != nil {
		t.Fatal(serr)
	}
	if r.Op != opCreate || r.HasNode || r.Configure == nil {
		t.Fatalf("instant node create parsed as %+v", r)
	}

	r, serr = parseIQ(mustParse(t, iq("set", `<pubsub `+own+`><affiliations node="n"><affiliation jid="Bob@Localhost/x" affiliation="member"/><affiliation jid="c@localhost"/></affiliations></pubsub>`)))
	if serr != nil {
		t.Fatal(serr)
	}
	if r.Op != opOwnerAffiliationsSet || len(r.Affiliations) != 1 || r.Affiliations[0].JID != "bob@localhost" || r.Affiliations[0].Affiliation != hub.AffMember {
		t.Fatalf("affiliations parsed as %+v; want bob@localhost as member and c@localhost unchanged", r.Affiliations)
	}

	r, serr = parseIQ(mustParse(t, iq("get", `<pubsub `+ps+`><subscriptions/></pubsub>`)))
	if serr != nil || r.Op != opSubscriptions {
		t.Fatalf("subscriptions: %+v %v", r, serr)
	}
	r, serr = parseIQ(mustParse(t, iq("get", `<pubsub `+own+`><default/></pubsub>`)))
	if serr != nil || r.Op != opDefault {
		t.Fatalf("default: %+v %v", r, serr)
	}
}

func TestElementRoundTripKeepsNamespaces(t *testing.T) {
	in := `<entry xmlns="http://www.w3.org/2005/Atom" xmlns:media="http://search.yahoo.com/mrss/" xml:lang="en">` +
		`<title type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml">A &amp; <b>B</b></div></title>` +
		`<media:thumbnail url="http://x/1.png"/><link href="http://x/1" rel="alternate"/>` +
		`<plain xmlns="">text &lt; more</plain><other xmlns:q="urn:q" q:attr="v"/></entry>`
	el := mustParse(t, in)
	out := el.standalone()
	again := mustParse(t, string(out))
	if !sameTree(el, again) {
		t.Fatalf("round trip changed the tree:\n in: %s\nout: %s", in, out)
	}
	if got := again.child("http://search.yahoo.com/mrss/", "thumbnail"); got == nil || got.attr("url") != "http://x/1.png" {
		t.Fatalf("prefixed child lost its namespace: %s", out)
	}
	if got := again.child("", "plain"); got == nil || got.text() != "text < more" {
		t.Fatalf("un-namespaced child changed: %s", out)
	}
	// Embedded in another namespace, the payload keeps its own.
	var b bytes.Buffer
	b.WriteString(`<event xmlns="http://jabber.org/protocol/pubsub#event"><item>`)
	b.Write(mustParse(t, `<bare>x</bare>`).standalone())
	b.WriteString(`</item></event>`)
	ev := mustParse(t, b.String())
	if ev.Children[0].Children[0].Name.Space != "" {
		t.Fatalf("payload without namespace took the event's: %s", b.String())
	}
}

// sameTree compares names, attributes and content.
func sameTree(a, b *element) bool {
	if a.Name != b.Name || len(a.Attr) != len(b.Attr) || len(a.content) != len(b.content) {
		return false
	}
	for i := range a.Attr {
		if a.Attr[i] != b.Attr[i] {
			return false
		}
	}
	for i := range a.content {
		switch x := a.content[i].(type) {
		case string:
			if y, ok := b.content[i].(string); !ok || x != y {
				return false
			}
		case *element:
			y, ok := b.content[i].(*element)
			if !ok || !sameTree(x, y) {
				return false
			}
		}
	}
	return true
}

func TestReadElementLimits(t *testing.T) {
	deep := strings.Repeat("<a>", maxStanzaDepth+5) + strings.Repeat("</a>", maxStanzaDepth+5)
	if _, err := parseDocument([]byte(deep)); err != errTooLarge {
		t.Fatalf("deep nesting: got %v, want errTooLarge", err)
	}
	wide := "<a>" + strings.Repeat("<b/>", maxStanzaElements+1) + "</a>"
	if _, err := parseDocument([]byte(wide)); err != errTooLarge {
		t.Fatalf("many elements: got %v, want errTooLarge", err)
	}
	big := "<a>" + strings.Repeat("x", maxStanzaBytes+1) + "</a>"
	if _, err := parseDocument([]byte(big)); err != errTooLarge {
		t.Fatalf("much text: got %v, want errTooLarge", err)
	}
}

func TestStanzaErrorXML(t *testing.T) {
	var b xmlBuf
	closedNode("n").write(&b, "pubsub.localhost")
	var got struct {
		XMLName xml.Name
		Type    string `xml:"type,attr"`
		By      string `xml:"by,attr"`
		Inner   []struct {
			XMLName xml.Name
		} `xml:",any"`
	}
	if err := xml.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, b.String())
	}
	if got.Type != "cancel" || got.By != "pubsub.localhost" || len(got.Inner) != 3 ||
		got.Inner[0].XMLName != (xml.Name{Space: nsStanzaErrors, Local: "not-allowed"}) ||
		got.Inner[2].XMLName != (xml.Name{Space: nsPubsubErrors, Local: "closed-node"}) {
		t.Fatalf("closed-node error is %s", b.String())
	}
}

func TestEntryFromPayload(t *testing.T) {
	atom := mustParse(t, `<entry xmlns="http://www.w3.org/2005/Atom"><id>tag:x,1</id><title> Hello
	  world </title><link rel="self" href="http://x/self"/><link href="http://x/1"/><summary>S</summary><updated>2024-05-01T10:00:00+02:00</updated></entry>`)
	e := entryFromPayload("i1", atom)
	if e.ID != "i1" || e.Title != "Hello world" || e.Link != "http://x/1" || e.Summary != "S" || e.Updated.Hour() != 8 {
		t.Fatalf("atom entry gave %+v", e)
	}
	if !bytes.Equal(e.Payload, atom.standalone()) {
		t.Fatalf("payload changed: %s", e.Payload)
	}
	// Without an item id, the entry's Atom id names the item.
	if e := entryFromPayload("", atom); e.ID != "tag:x,1" {
		t.Errorf("an entry published without an item id got the id %q, want its Atom id", e.ID)
	}
	other := mustParse(t, `<geoloc xmlns="http://jabber.org/protocol/geoloc"><lat>1</lat></geoloc>`)
	e = entryFromPayload("", other)
	if e.Title != "" || e.ID != "" || !bytes.Contains(e.Payload, []byte(`<geoloc xmlns="http://jabber.org/protocol/geoloc"><lat>1</lat></geoloc>`)) {
		t.Fatalf("non-Atom payload gave %+v (%s)", e, e.Payload)
	}
}

func TestParseChatCommand(t *testing.T) {
	cases := []struct {
		body  string
		want  chatCommand
		count bool
	}{
		{"help", chatCommand{Name: "help"}, false},
		{"  NODES ", chatCommand{Name: "nodes"}, false},
		{"subscribe feeds/demo", chatCommand{Name: "subscribe", Arg: "feeds/demo"}, false},
		{"subscribe my node", chatCommand{Name: "subscribe", Arg: "my node"}, false},
		{"last demo 3", chatCommand{Name: "last", Arg: "demo 3", Count: 3, HasCount: true}, true},
		{"last demo", chatCommand{Name: "last", Arg: "demo"}, false},
		{"what is this", chatCommand{Name: "unknown", Word: "what"}, false},
		{"", chatCommand{Name: "help"}, false},
	}
	for _, tc := range cases {
		if got := parseChatCommand(tc.body); got != tc.want {
			t.Errorf("parseChatCommand(%q) = %+v, want %+v", tc.body, got, tc.want)
		}
	}
}

// TestNamesThatAreNoXMLNames: encoding/xml takes "p:0" as a name when p is
// bound to no namespace; the tree drops such an attribute and refuses such
// an element, so what it writes out always parses again.
func TestNamesThatAreNoXMLNames(t *testing.T) {
	el, err := parseDocument([]byte(`<a xmlns:m=""><b m:0="x" ok="y"/></a>`))
	if err != nil {
		t.Fatal(err)
	}
	if b := el.Children[0]; len(b.Attr) != 1 || b.Attr[0].Name.Local != "ok" {
		t.Errorf("attributes %v, want only ok", b.Attr)
	}
	if _, err := parseDocument(el.standalone()); err != nil {
		t.Errorf("written out, the tree does not parse: %v", err)
	}
	if _, err := parseDocument([]byte(`<a xmlns:m=""><m:0/></a>`)); !errors.Is(err, errBadName) {
		t.Errorf("an element named 0 after its prefix: %v, want errBadName", err)
	}
}
