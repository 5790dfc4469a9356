package component

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// BenchmarkRequests measures the request side without an XMPP server: an
// IQ as the reader hands it over, parsed and carried out against a
// SQLite store, its answer rendered: items retrieval with an XEP-0059
// page, the service's disco#items paged, a node's configuration form,
// and a configuration form submitted.
func BenchmarkRequests(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "pingd.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const owner = "owner@example.org"
	h, err := hub.New(hub.Config{Stores: store.HubStores(st), Admins: []string{owner}})
	if err != nil {
		b.Fatal(err)
	}
	c, err := New(Config{Hub: h, Store: st, Domain: "pubsub.example.org", Addr: "127.0.0.1:5347", Secret: "s"})
	if err != nil {
		b.Fatal(err)
	}
	c.limit.learned.Store(minStanzaBudget)
	for i := range 50 {
		name := fmt.Sprintf("node-%02d", i)
		if _, _, err := h.CreateNode(ctx, hub.NodeSpec{Name: name, Config: hub.DefaultNodeConfig()}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 40 {
		id := fmt.Sprintf("i%d", i)
		if _, err := h.Publish(ctx, "node-00", "", []hub.Entry{{ID: id, Title: id, Payload: atomEntry(id, "Item "+id)}}); err != nil {
			b.Fatal(err)
		}
	}
	from := jid.MustParse(owner + "/r")
	const to = `to="pubsub.example.org" from="owner@example.org/r"`
	cases := []struct{ name, iq string }{
		{"items-page", `<iq type="get" id="1" ` + to + `><pubsub xmlns="` + nsPubsub + `"><items node="node-00"/>` +
			`<set xmlns="` + nsRSM + `"><max>10</max><after>i30</after></set></pubsub></iq>`},
		{"disco-items-page", `<iq type="get" id="2" ` + to + `><query xmlns="` + nsDiscoItems + `">` +
			`<set xmlns="` + nsRSM + `"><max>20</max><after>node-10</after></set></query></iq>`},
		{"configure-get", `<iq type="get" id="3" ` + to + `><pubsub xmlns="` + nsPubsubOwner + `"><configure node="node-01"/></pubsub></iq>`},
		{"configure-set", `<iq type="set" id="4" ` + to + `><pubsub xmlns="` + nsPubsubOwner + `"><configure node="node-01">` +
			`<x xmlns="jabber:x:data" type="submit"><field var="FORM_TYPE" type="hidden"><value>` + formNodeConfig + `</value></field>` +
			`<field var="pubsub#title"><value>A title</value></field><field var="pubsub#max_items"><value>20</value></field></x>` +
			`</configure></pubsub></iq>`},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				iq, err := parseDocument([]byte(tc.iq))
				if err != nil {
					b.Fatal(err)
				}
				req, serr := parseIQ(iq)
				if serr != nil {
					b.Fatal(serr)
				}
				payload, serr := c.service.execute(ctx, from, req)
				if serr != nil {
					b.Fatal(serr)
				}
				if c.service.answerBytes(ctx, iq, req, from, payload, nil) == nil {
					b.Fatal("no answer")
				}
			}
		})
	}
}
