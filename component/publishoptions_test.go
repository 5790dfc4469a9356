package component

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// publishWithOptions is an owner's publish of one Atom entry with the
// given publish-options fields (XEP-0060 §7.1.5).
func publishWithOptions(node, id string, fields ...[2]string) string {
	var f strings.Builder
	f.WriteString(`<field var="FORM_TYPE" type="hidden"><value>http://jabber.org/protocol/pubsub#publish-options</value></field>`)
	for _, kv := range fields {
		fmt.Fprintf(&f, `<field var=%q><value>%s</value></field>`, kv[0], kv[1])
	}
	return fmt.Sprintf(`<pubsub xmlns="http://jabber.org/protocol/pubsub"><publish node=%q><item id=%q>%s</item></publish>`+
		`<publish-options><x xmlns="jabber:x:data" type="submit">%s</x></publish-options></pubsub>`,
		node, id, atomEntry(id, "Title "+id), f.String())
}

// TestPublishOptionsPreconditions: an owner's publish with publish-options
// goes ahead when the node has the values named, and is refused with
// conflict + precondition-not-met (cancel) naming the field, publishing
// nothing, when it has not or pingd's nodes have no such field; disco#info
// advertises the feature.
func TestPublishOptionsPreconditions(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	n := e.createNode("news", "News", hub.AccessOpen)
	admin := e.dial("admin", "publisher")

	info := result(t, e.request(admin, "get", `<query xmlns="http://jabber.org/protocol/disco#info"/>`))
	advertised := false
	for _, f := range find(info, "query").childrenNamed(nsDiscoInfo, "feature") {
		advertised = advertised || f.attr("var") == nsPubsub+"#publish-options"
	}
	if !advertised {
		t.Errorf("disco#info does not advertise publish-options: %s", info.standalone())
	}

	met := [][][2]string{
		{{"pubsub#access_model", "open"}},
		{{"pubsub#access_model", "open"}, {"pubsub#deliver_payloads", "true"}, {"pubsub#persist_items", "1"}},
		{{"pubsub#max_items", fmt.Sprint(n.MaxItems)}, {"pubsub#notification_type", "headline"}, {"pubsub#title", "News"}},
	}
	for i, fields := range met {
		id := fmt.Sprintf("ok%d", i)
		ans := result(t, e.request(admin, "set", publishWithOptions("news", id, fields...)))
		if it := find(ans, "pubsub", "publish", "item"); it == nil || it.attr("id") != id {
			t.Errorf("publish with %v answered %s", fields, ans.standalone())
		}
	}
	for _, tc := range []struct {
		fields [][2]string
		field  string
	}{
		{[][2]string{{"pubsub#access_model", "whitelist"}}, "access_model"},
		{[][2]string{{"pubsub#access_model", "open"}, {"pubsub#max_items", "1"}}, "max_items"},
		{[][2]string{{"pubsub#frobnicate", "1"}}, "frobnicate"},
		{[][2]string{{"pubsub#persist_items", "false"}}, "persist_items"},
	} {
		errEl := stanzaErr(t, e.request(admin, "set", publishWithOptions("news", "refused", tc.fields...)), "cancel", "conflict", "precondition-not-met")
		if text := errEl.child(nsStanzaErrors, "text").text(); text != "Field does not match: "+tc.field {
			t.Errorf("preconditions %v refused with the text %q, want the field %s named", tc.fields, text, tc.field)
		}
	}
	items, err := e.hub.Items(e.ctx, n, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range items {
		ids = append(ids, it.ItemID)
	}
	if strings.Join(ids, ",") != "ok2,ok1,ok0" {
		t.Errorf("the node's items are %v, want the three publishes whose preconditions held", ids)
	}
}
