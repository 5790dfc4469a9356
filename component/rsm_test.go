package component

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"mellium.im/xmpp/stanza"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// TestParseForeignChildrenIgnored: a child of <pubsub/> in a namespace
// pingd does not handle is not a second action (XEP-0059 §8: an entity
// that does not understand an extension ignores it).
func TestParseForeignChildrenIgnored(t *testing.T) {
	const ps = `xmlns="http://jabber.org/protocol/pubsub"`
	const own = `xmlns="http://jabber.org/protocol/pubsub#owner"`
	for _, c := range []struct {
		stanza string
		op     op
	}{
		{iq("get", `<pubsub `+ps+`><items node="n"/><set xmlns="http://jabber.org/protocol/rsm"><max>10</max></set></pubsub>`), opItems},
		{iq("get", `<pubsub `+ps+`><set xmlns="http://jabber.org/protocol/rsm"/><items node="n"/></pubsub>`), opItems},
		{iq("set", `<pubsub `+ps+`><subscribe node="n" jid="a@localhost"/><x xmlns="urn:example:unknown"/></pubsub>`), opSubscribe},
		{iq("set", `<pubsub `+ps+`><subscribe node="n" jid="a@localhost"/><options/><hint xmlns="urn:example"/></pubsub>`), opSubscribe},
		{iq("get", `<pubsub `+own+`><configure node="n"/><set xmlns="http://jabber.org/protocol/rsm"/></pubsub>`), opConfigureGet},
	} {
		r, serr := parseIQ(mustParse(t, c.stanza))
		if serr != nil || r.Op != c.op {
			t.Errorf("%s: got %+v, %v; want op %s", c.stanza, r, serr, c.op)
		}
	}
	r, serr := parseIQ(mustParse(t, iq("get", `<pubsub `+ps+`><items node="n"/><set xmlns="http://jabber.org/protocol/rsm">`+
		`<max>2</max><after>b</after></set></pubsub>`)))
	if serr != nil || r.Page == nil || r.Page.Max != 2 || !r.Page.HasAfter || r.Page.After != "b" || r.Page.Index != -1 {
		t.Errorf("result set request parsed as %+v, %v", r.Page, serr)
	}
	r, serr = parseIQ(mustParse(t, iq("get", `<pubsub `+ps+`><items node="n"/></pubsub>`)))
	if serr != nil || r.Page != nil {
		t.Errorf("a request without <set/> has a page %+v (%v)", r.Page, serr)
	}
	for _, bad := range []string{
		`<max>-1</max>`, `<max>many</max>`, `<index>x</index>`, `<after/>`, `<after>a</after><before>b</before>`,
		`<after>` + strings.Repeat("a", maxPageUIDBytes+1) + `</after>`,
	} {
		_, serr := parseIQ(mustParse(t, iq("get", `<pubsub `+ps+`><items node="n"/><set xmlns="http://jabber.org/protocol/rsm">`+bad+`</set></pubsub>`)))
		if serr == nil || serr.Condition != stanza.BadRequest {
			t.Errorf("result set %s: got %v, want bad-request", bad, serr)
		}
	}
}

func TestPageOf(t *testing.T) {
	var all []hub.Event
	for _, id := range []string{"e", "d", "c", "b", "a"} { // newest first
		all = append(all, hub.Event{ItemID: id})
	}
	ids := func(evs []hub.Event) string {
		var s []string
		for _, e := range evs {
			s = append(s, e.ItemID)
		}
		return strings.Join(s, "")
	}
	for _, c := range []struct {
		name  string
		pr    pageRequest
		want  string
		first int
		cond  stanza.Condition
	}{
		{"everything", pageRequest{Max: -1, Index: -1}, "edcba", 0, ""},
		{"first page", pageRequest{Max: 2, Index: -1}, "ed", 0, ""},
		{"count only", pageRequest{Max: 0, Index: -1}, "", 0, ""},
		{"after", pageRequest{Max: 2, Index: -1, After: "d", HasAfter: true}, "cb", 2, ""},
		{"after the last", pageRequest{Max: 2, Index: -1, After: "a", HasAfter: true}, "", 5, ""},
		{"before", pageRequest{Max: 2, Index: -1, Before: "b", HasBefore: true}, "dc", 1, ""},
		{"before, short", pageRequest{Max: 3, Index: -1, Before: "d", HasBefore: true}, "e", 0, ""},
		{"last page", pageRequest{Max: 2, Index: -1, HasBefore: true}, "ba", 3, ""},
		{"index", pageRequest{Max: 2, Index: 3}, "ba", 3, ""},
		{"index past the end", pageRequest{Max: 2, Index: 9}, "", 5, ""},
		{"unknown after", pageRequest{Max: 2, Index: -1, After: "zz", HasAfter: true}, "", 0, stanza.ItemNotFound},
		{"unknown before", pageRequest{Max: 2, Index: -1, Before: "zz", HasBefore: true}, "", 0, stanza.ItemNotFound},
	} {
		page, first, serr := pageOf(all, &c.pr)
		switch {
		case c.cond != "":
			if serr == nil || serr.Condition != c.cond {
				t.Errorf("%s: got %q, %v; want %s", c.name, ids(page), serr, c.cond)
			}
		case serr != nil || ids(page) != c.want || first != c.first:
			t.Errorf("%s: got %q from %d (%v), want %q from %d", c.name, ids(page), first, serr, c.want, c.first)
		}
	}
}

// TestItemsResultSet pages through a node's items over XMPP the way
// StanzaJS asks by default (an RSM <set/> beside <items/>).
func TestItemsResultSet(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("demo", "", hub.AccessOpen)
	e.publish("demo", "i1", "i2", "i3", "i4", "i5")
	alice := e.dial("alice", "rsm")
	items := func(set string) *element {
		return e.request(alice, "get", fmt.Sprintf(`<pubsub xmlns=%q><items node="demo"/><set xmlns=%q>%s</set></pubsub>`, nsPubsub, nsRSM, set))
	}
	page := func(el *element) (ids []string, first, firstIndex, last, count string) {
		t.Helper()
		ps := find(result(t, el), "pubsub")
		for _, it := range ps.child(nsPubsub, "items").childrenNamed(nsPubsub, "item") {
			ids = append(ids, it.attr("id"))
		}
		set := ps.child(nsRSM, "set")
		if set == nil {
			t.Fatalf("no <set/> in %s", el.standalone())
		}
		f := set.child(nsRSM, "first")
		return ids, f.text(), f.attr("index"), set.child(nsRSM, "last").text(), set.child(nsRSM, "count").text()
	}
	ids, first, idx, last, count := page(items(`<max>2</max>`))
	if !slices.Equal(ids, []string{"i5", "i4"}) || first != "i5" || idx != "0" || last != "i4" || count != "5" {
		t.Errorf("first page %v first=%s index=%s last=%s count=%s", ids, first, idx, last, count)
	}
	ids, _, idx, _, _ = page(items(`<max>2</max><after>i4</after>`))
	if !slices.Equal(ids, []string{"i3", "i2"}) || idx != "2" {
		t.Errorf("next page %v from %s", ids, idx)
	}
	ids, _, idx, _, _ = page(items(`<max>2</max><before/>`))
	if !slices.Equal(ids, []string{"i2", "i1"}) || idx != "3" {
		t.Errorf("last page %v from %s", ids, idx)
	}
	ids, _, _, _, _ = page(items(``)) // an empty <set/>: every item, and the count
	if len(ids) != 5 {
		t.Errorf("an empty <set/> returned %v", ids)
	}
	// The item count alone.
	ps := find(result(t, items(`<max>0</max>`)), "pubsub")
	if set := ps.child(nsRSM, "set"); set == nil || set.child(nsRSM, "count").text() != "5" || set.child(nsRSM, "first") != nil ||
		len(ps.child(nsPubsub, "items").Children) != 0 {
		t.Errorf("max 0 answered %s", ps.standalone())
	}
	stanzaErr(t, items(`<max>2</max><after>gone</after>`), "cancel", "item-not-found", "")
	// Without a <set/> the answer has none, as before.
	if ps := find(result(t, e.request(alice, "get", fmt.Sprintf(`<pubsub xmlns=%q><items node="demo"/></pubsub>`, nsPubsub))), "pubsub"); ps.child(nsRSM, "set") != nil {
		t.Errorf("an items request without <set/> got one: %s", ps.standalone())
	}
	info := string(result(t, e.request(alice, "get", `<query xmlns="http://jabber.org/protocol/disco#info"/>`)).standalone())
	for _, f := range []string{`var="` + nsRSM + `"`, `var="` + nsPubsub + `#rsm"`} {
		if !strings.Contains(info, f) {
			t.Errorf("disco#info lacks %s", f)
		}
	}
}

// The <set/> of an answer keeps its bytes: first (with its index when
// known), last and count for a page with items, only count for an empty
// one; ids escaped as in every other element pingd writes.
func TestPageResultBytes(t *testing.T) {
	page := func(ids ...string) []hub.Event {
		evs := make([]hub.Event, len(ids))
		for i, id := range ids {
			evs[i] = hub.Event{ItemID: id}
		}
		return evs
	}
	for _, tc := range []struct {
		page         []hub.Event
		first, count int
		want         string
	}{
		{page("a", "b"), 0, 5, `<set xmlns="http://jabber.org/protocol/rsm"><first index="0">a</first><last>b</last><count>5</count></set>`},
		{page("c"), -1, 3, `<set xmlns="http://jabber.org/protocol/rsm"><first>c</first><last>c</last><count>3</count></set>`},
		{nil, 2, 7, `<set xmlns="http://jabber.org/protocol/rsm"><count>7</count></set>`},
		{page(`x&<y>"'`, "z\tw"), 4, 9, `<set xmlns="http://jabber.org/protocol/rsm"><first index="4">x&amp;&lt;y&gt;&#34;&#39;</first><last>z&#x9;w</last><count>9</count></set>`},
	} {
		var b xmlBuf
		writePageResult(&b, tc.page, tc.first, tc.count)
		if got := b.String(); got != tc.want {
			t.Errorf("page %v: got  %s\nwant %s", tc.page, got, tc.want)
		}
	}
}
