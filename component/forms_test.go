package component

import (
	"reflect"
	"strings"
	"testing"

	"mellium.im/xmpp/stanza"

	"github.com/pingd/pingd/hub"
)

func submitForm(fields ...string) string {
	var b strings.Builder
	b.WriteString(`<x xmlns="jabber:x:data" type="submit"><field var="FORM_TYPE" type="hidden"><value>http://jabber.org/protocol/pubsub#node_config</value></field>`)
	for i := 0; i+1 < len(fields); i += 2 {
		b.WriteString(`<field var="` + fields[i] + `"><value>` + fields[i+1] + `</value></field>`)
	}
	b.WriteString(`</x>`)
	return b.String()
}

func TestConfigFormRoundTrip(t *testing.T) {
	cfg := hub.NodeConfig{Title: "Demo & <friends>", AccessModel: hub.AccessWhitelist, MaxItems: 7,
		DeliverPayloads: false, NotificationType: hub.NotifyNormal, SendLastPublished: hub.SendLastNever}
	rendered := formBytes(configForm(cfg))
	// What a client does: take the form, change its type to submit, send it back.
	submitted := strings.Replace(string(rendered), `type="form"`, `type="submit"`, 1)
	f, serr := parseForm(mustParse(t, submitted))
	if serr != nil {
		t.Fatalf("parse rendered form: %v\n%s", serr, rendered)
	}
	got, serr := applyConfigForm(hub.DefaultNodeConfig(), f)
	if serr != nil {
		t.Fatalf("apply rendered form: %v", serr)
	}
	if !reflect.DeepEqual(got, cfg) {
		t.Fatalf("round trip gave %+v, want %+v\n%s", got, cfg, rendered)
	}
}

func TestApplyConfigForm(t *testing.T) {
	base := hub.DefaultNodeConfig()
	cases := []struct {
		name string
		form string
		cond stanza.Condition
		app  string
		want func(*hub.NodeConfig)
	}{
		{name: "partial keeps the rest", form: submitForm("pubsub#title", "New"),
			want: func(c *hub.NodeConfig) { c.Title = "New" }},
		{name: "booleans as words", form: submitForm("pubsub#deliver_payloads", "false"),
			want: func(c *hub.NodeConfig) { c.DeliverPayloads = false }},
		{name: "max", form: submitForm("pubsub#max_items", "max"),
			want: func(c *hub.NodeConfig) { c.MaxItems = hub.MaxItemsLimit }},
		{name: "unknown fields ignored", form: submitForm("pubsub#persist_items", "1", "pubsub#notify_retract", "0"),
			want: func(*hub.NodeConfig) {}},
		{name: "unsupported access model", form: submitForm("pubsub#access_model", "presence"),
			cond: stanza.NotAcceptable, app: "unsupported-access-model"},
		{name: "max_items not a number", form: submitForm("pubsub#max_items", "many"), cond: stanza.NotAcceptable},
		{name: "max_items too large", form: submitForm("pubsub#max_items", "100000"), cond: stanza.NotAcceptable},
		{name: "max_items zero", form: submitForm("pubsub#max_items", "0"), cond: stanza.NotAcceptable},
		{name: "bad boolean", form: submitForm("pubsub#deliver_payloads", "maybe"), cond: stanza.NotAcceptable},
		{name: "bad notification type", form: submitForm("pubsub#notification_type", "chat"), cond: stanza.NotAcceptable},
		{name: "title too long", form: submitForm("pubsub#title", strings.Repeat("t", 2000)), cond: stanza.NotAcceptable},
		{name: "wrong FORM_TYPE", form: `<x xmlns="jabber:x:data" type="submit"><field var="FORM_TYPE"><value>urn:other</value></field></x>`,
			cond: stanza.BadRequest},
		{name: "two values", form: `<x xmlns="jabber:x:data" type="submit"><field var="pubsub#title"><value>a</value><value>b</value></field></x>`,
			cond: stanza.NotAcceptable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, serr := parseForm(mustParse(t, tc.form))
			if serr != nil {
				t.Fatalf("parse: %v", serr)
			}
			got, serr := applyConfigForm(base, f)
			if tc.cond != "" {
				if serr == nil || serr.Condition != tc.cond || serr.App != tc.app {
					t.Fatalf("got %v (%+v); want %s %s", serr, got, tc.cond, tc.app)
				}
				return
			}
			if serr != nil {
				t.Fatalf("refused: %v", serr)
			}
			want := base
			tc.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestParseFormRejectsMalformed(t *testing.T) {
	for _, s := range []string{
		`<x xmlns="jabber:x:data" type="submit"><bogus/></x>`,
		`<x xmlns="urn:not-forms" type="submit"/>`,
	} {
		if _, serr := parseForm(mustParse(t, s)); serr == nil || serr.Condition != stanza.BadRequest {
			t.Errorf("parseForm(%s) = %v, want bad-request", s, serr)
		}
	}
}

func TestCreateConfigureNeedsSubmitForm(t *testing.T) {
	conf := mustParse(t, `<configure xmlns="http://jabber.org/protocol/pubsub"><x xmlns="jabber:x:data" type="form"/></configure>`)
	if _, serr := configFromRequest(conf); serr == nil || serr.Condition != stanza.BadRequest {
		t.Fatalf("a form of type form in create: %v, want bad-request", serr)
	}
	conf = mustParse(t, `<configure xmlns="http://jabber.org/protocol/pubsub">`+submitForm("pubsub#access_model", "whitelist")+`</configure>`)
	cfg, serr := configFromRequest(conf)
	if serr != nil || cfg.AccessModel != hub.AccessWhitelist || cfg.MaxItems != hub.DefaultMaxItems {
		t.Fatalf("create-and-configure gave %+v, %v", cfg, serr)
	}
}

func TestMetaDataForm(t *testing.T) {
	n := &hub.Node{Name: "demo", NodeConfig: hub.DefaultNodeConfig(), SourceURL: "http://example.org/feed"}
	n.Title = "Demo"
	x := mustParse(t, string(formBytes(metaDataForm(n, 3, []string{"admin@localhost"}, true))))
	f, serr := parseForm(x)
	if serr != nil {
		t.Fatal(serr)
	}
	if x.attr("type") != "result" {
		t.Errorf("meta-data form type %q, want result", x.attr("type"))
	}
	for k, want := range map[string]string{
		"FORM_TYPE": formMetaData, fieldTitle: "Demo", fieldAccessModel: "open", fieldMaxItems: "50",
		"pubsub#num_subscribers": "3", "pubsub#owner": "admin@localhost", "pubsub#type": nsAtom,
	} {
		if v := f.Values[k]; len(v) != 1 || v[0] != want {
			t.Errorf("meta-data %s = %q, want %q", k, v, want)
		}
	}
}
