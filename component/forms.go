package component

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"fmt"
	"strconv"
	"strings"
	"time"

	"mellium.im/xmpp/form"

	"github.com/pingd/pingd/hub"
)

// The XEP-0004 data forms of XEP-0060: the node configuration form
// (pubsub#node_config) an owner gets and submits, and the node meta-data
// (pubsub#meta-data) disco#info on a node returns.

const (
	fieldTitle            = "pubsub#title"
	fieldAccessModel      = "pubsub#access_model"
	fieldMaxItems         = "pubsub#max_items"
	fieldDeliverPayloads  = "pubsub#deliver_payloads"
	fieldNotificationType = "pubsub#notification_type"
	fieldSendLastItem     = "pubsub#send_last_published_item"
)

// renderForm writes a mellium form as XML.
func renderForm(b *xmlBuf, d *form.Data) {
	e := xml.NewEncoder(b)
	// Encoding our own form to a buffer cannot fail.
	_, _ = d.WriteXML(e)
	_ = e.Flush()
}

func boolValue(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

// configForm is the node configuration form (XEP-0060 §8.2) filled with cfg.
func configForm(cfg hub.NodeConfig) *form.Data {
	return form.New(
		form.Title("Node configuration"),
		form.Hidden("FORM_TYPE", form.Value(formNodeConfig)),
		form.Text(fieldTitle, form.Label("A friendly name for the node"), form.Value(cfg.Title)),
		form.List(fieldAccessModel, form.Label("Who may subscribe and retrieve items"),
			form.Value(string(cfg.AccessModel)),
			form.ListItem("Anyone", string(hub.AccessOpen)),
			form.ListItem("Only those on the whitelist (member, publisher or owner)", string(hub.AccessWhitelist))),
		form.Text(fieldMaxItems, form.Label(fmt.Sprintf("Number of items to keep (1 to %d)", hub.MaxItemsLimit)),
			form.Value(strconv.Itoa(cfg.MaxItems))),
		form.Boolean(fieldDeliverPayloads, form.Label("Deliver payloads with event notifications"),
			form.Value(boolValue(cfg.DeliverPayloads))),
		form.List(fieldNotificationType, form.Label("Message type of event notifications"),
			form.Value(cfg.NotificationType),
			form.ListItem("Messages of type normal", hub.NotifyNormal),
			form.ListItem("Messages of type headline", hub.NotifyHeadline)),
		form.List(fieldSendLastItem, form.Label("When to send the last published item"),
			form.Value(cmp.Or(cfg.SendLastPublished, hub.SendLastOnSub)),
			form.ListItem("When a new subscription is processed", hub.SendLastOnSub),
			form.ListItem("Never", hub.SendLastNever)),
	)
}

// metaDataForm is the node meta-data (XEP-0060 §5.4) of n; its description
// names the node's source only with showSource.
func metaDataForm(n *hub.Node, subscribers int, owners []string, showSource bool) *form.Data {
	fields := []form.Field{
		form.Result,
		form.Hidden("FORM_TYPE", form.Value(formMetaData)),
		form.Text(fieldTitle, form.Label("A friendly name for the node"), form.Value(n.Title)),
		form.Text("pubsub#type", form.Label("Payload type"), form.Value(nsAtom)),
		form.List(fieldAccessModel, form.Label("Access model"), form.Value(string(n.AccessModel))),
		form.Text(fieldMaxItems, form.Label("Number of items kept"), form.Value(strconv.Itoa(n.MaxItems))),
		form.Boolean(fieldDeliverPayloads, form.Label("Payloads delivered with notifications"),
			form.Value(boolValue(n.DeliverPayloads))),
		form.List(fieldNotificationType, form.Label("Message type of notifications"), form.Value(n.NotificationType)),
		form.Text("pubsub#num_subscribers", form.Label("Number of subscribers"), form.Value(strconv.Itoa(subscribers))),
	}
	if n.SourceURL != "" && showSource {
		fields = append(fields, form.Text("pubsub#description", form.Label("A description of the node"),
			form.Value("Items of "+n.SourceURL)))
	}
	if !n.CreatedAt.IsZero() {
		fields = append(fields, form.Text("pubsub#creation_date", form.Label("Creation date"),
			form.Value(n.CreatedAt.UTC().Format(time.RFC3339))))
	}
	if len(owners) > 0 {
		opts := []form.Option{form.Label("Owners")}
		for _, o := range owners {
			opts = append(opts, form.Value(o))
		}
		fields = append(fields, form.JIDMulti("pubsub#owner", opts...))
	}
	return form.New(fields...)
}

// submittedForm is a parsed data form.
type submittedForm struct {
	Type   string
	Values map[string][]string
}

// parseForm parses an <x xmlns="jabber:x:data"/> element.
func parseForm(x *element) (*submittedForm, *stanzaError) {
	if x == nil || x.Name.Space != nsDataForms || x.Name.Local != "x" {
		return nil, badRequest("", "expected a jabber:x:data form")
	}
	var d form.Data
	if err := xml.Unmarshal(x.standalone(), &d); err != nil {
		return nil, badRequest("", "malformed data form: %v", err)
	}
	f := &submittedForm{Type: x.attr("type"), Values: map[string][]string{}}
	d.ForFields(func(fd form.FieldData) {
		if fd.Var != "" {
			f.Values[fd.Var] = fd.Raw
		}
	})
	return f, nil
}

// single returns the only value of a field.
func (f *submittedForm) single(name string) (string, bool, *stanzaError) {
	v, ok := f.Values[name]
	if !ok {
		return "", false, nil
	}
	switch len(v) {
	case 0:
		return "", true, nil
	case 1:
		return strings.TrimSpace(v[0]), true, nil
	}
	return "", true, notAcceptable("", "field %s takes one value, got %d", name, len(v))
}

// applyConfigForm applies a submitted node configuration form to cfg
// (XEP-0004: fields left out keep their values). Unknown fields are ignored,
// so clients that send every field they know keep working; values pingd
// cannot honour are refused with not-acceptable as XEP-0060 §8.2.5.3 says.
func applyConfigForm(cfg hub.NodeConfig, f *submittedForm) (hub.NodeConfig, *stanzaError) {
	if ft, ok := f.Values["FORM_TYPE"]; ok && (len(ft) != 1 || strings.TrimSpace(ft[0]) != formNodeConfig) {
		return cfg, badRequest("", "FORM_TYPE must be %s", formNodeConfig)
	}
	if v, ok, err := f.single(fieldTitle); err != nil {
		return cfg, err
	} else if ok {
		cfg.Title = v
	}
	if v, ok, err := f.single(fieldAccessModel); err != nil {
		return cfg, err
	} else if ok {
		m := hub.AccessModel(v)
		if !m.Valid() {
			return cfg, notAcceptable("unsupported-access-model", "access model %q is not supported (open or whitelist)", v)
		}
		cfg.AccessModel = m
	}
	if v, ok, err := f.single(fieldMaxItems); err != nil {
		return cfg, err
	} else if ok {
		n, err := strconv.Atoi(v)
		if v == "max" {
			n, err = hub.MaxItemsLimit, nil
		}
		if err != nil || n < 1 || n > hub.MaxItemsLimit {
			return cfg, notAcceptable("", "pubsub#max_items must be a number from 1 to %d or \"max\", not %q", hub.MaxItemsLimit, v)
		}
		cfg.MaxItems = n
	}
	if v, ok, err := f.single(fieldDeliverPayloads); err != nil {
		return cfg, err
	} else if ok {
		b, valid := parseXSDBool(v)
		if !valid {
			return cfg, notAcceptable("", "pubsub#deliver_payloads must be a boolean, not %q", v)
		}
		cfg.DeliverPayloads = b
	}
	if v, ok, err := f.single(fieldNotificationType); err != nil {
		return cfg, err
	} else if ok {
		if v != hub.NotifyNormal && v != hub.NotifyHeadline {
			return cfg, notAcceptable("", "pubsub#notification_type must be normal or headline, not %q", v)
		}
		cfg.NotificationType = v
	}
	if v, ok, err := f.single(fieldSendLastItem); err != nil {
		return cfg, err
	} else if ok {
		switch v {
		case hub.SendLastOnSub, hub.SendLastNever:
			cfg.SendLastPublished = v
		case hub.SendLastOnSubAndPresence:
			return cfg, notAcceptable("", "%s %s is not supported: pingd does not follow its subscribers' presence; "+
				"it sends the last item to new subscriptions (%s) or never", fieldSendLastItem, v, hub.SendLastOnSub)
		default:
			return cfg, notAcceptable("", "%s must be %s or %s, not %q", fieldSendLastItem, hub.SendLastOnSub, hub.SendLastNever, v)
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, notAcceptable("", "%v", err)
	}
	return cfg, nil
}

// parseXSDBool parses an xs:boolean as XEP-0004 uses it.
func parseXSDBool(s string) (value, ok bool) {
	switch s {
	case "1", "true":
		return true, true
	case "0", "false":
		return false, true
	}
	return false, false
}

// configFromRequest reads the optional <configure><x/></configure> of a
// create request (XEP-0060 §8.1.3) on top of the default configuration.
func configFromRequest(configure *element) (hub.NodeConfig, *stanzaError) {
	cfg := hub.DefaultNodeConfig()
	if configure == nil {
		return cfg, nil
	}
	x := configure.child(nsDataForms, "x")
	if x == nil {
		return cfg, nil
	}
	f, serr := parseForm(x)
	if serr != nil {
		return cfg, serr
	}
	if f.Type != string(form.TypeSubmit) {
		return cfg, badRequest("", "the configuration form must be of type submit, not %q", f.Type)
	}
	return applyConfigForm(cfg, f)
}

// formBytes renders a form on its own (tests, node meta-data).
func formBytes(d *form.Data) []byte {
	var b xmlBuf
	renderForm(&b, d)
	return bytes.Clone(b.Bytes())
}
