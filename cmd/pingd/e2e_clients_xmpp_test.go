package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// slixEvent is a pubsub event as the slixmpp client recorded it.
type slixEvent struct {
	Kind         string     `json:"kind"`
	Node         string     `json:"node"`
	ID           string     `json:"id"`
	JID          string     `json:"jid"`
	Subscription string     `json:"subscription"`
	Entry        *slixEntry `json:"entry"`
}

// slixEntry is the Atom entry of an item.
type slixEntry struct {
	NS      string `json:"ns"`
	ID      string `json:"id"`
	Title   string `json:"title"`
	Link    string `json:"link"`
	Updated string `json:"updated"`
}

// slixItem is an item of a retrieve-items answer.
type slixItem struct {
	ID    string     `json:"id"`
	Entry *slixEntry `json:"entry"`
}

// slixError is an error answer as slixmpp's IqError shows it.
type slixError struct {
	IQError *struct {
		Type            string `json:"error_type"`
		Condition       string `json:"condition"`
		PubsubCondition string `json:"pubsub_condition"`
		Unsupported     string `json:"unsupported"`
		Text            string `json:"text"`
	} `json:"iq_error"`
}

type slixSubscription struct {
	Node         string `json:"node"`
	JID          string `json:"jid"`
	SubID        string `json:"subid"`
	Subscription string `json:"subscription"`
}

type slixForm struct {
	FormType string         `json:"form_type"`
	Fields   map[string]any `json:"fields"`
}

type slixChat struct {
	From string `json:"from"`
	Type string `json:"type"`
	Body string `json:"body"`
}

// TestClientsSlixmpp: slixmpp's XEP-0030 and XEP-0060 plugins, as an
// application would use them, against pingd's component: discovery,
// subscribing (twice), notifications after a ping, retrieving items,
// unsubscribing, the whitelist node's closed-node error, every owner use
// case as an admin JID (each XEP-0060 feature disco#info advertises is
// exercised), and the chat commands.
func TestClientsSlixmpp(t *testing.T) {
	e := startClientsEnv(t, "reader", "owner", "other")
	requirePython(t, map[string]string{"slixmpp": "python3-slixmpp"})
	comp, domain := e.p.ComponentDomain, e.p.Domain
	reader, owner := "reader@"+domain, "owner@"+domain
	report := runClientReport(t, 150*time.Second, "slixmpp_client.py", map[string]any{
		"c2s":            e.p.C2SAddr,
		"component":      comp,
		"pingd_url":      e.d.URL,
		"control_url":    e.control,
		"feed_url":       e.newsFeed,
		"open_node":      "news",
		"whitelist_node": "private",
		"accounts": map[string]any{
			"reader": map[string]string{"jid": reader, "password": "pw"},
			"owner":  map[string]string{"jid": owner, "password": "pw"},
			"other":  map[string]string{"jid": "other@" + domain, "password": "pw"},
		},
	})

	// wantError checks an error answer: XEP-0060's type, RFC 6120
	// condition and pubsub#errors condition ("" for none).
	wantError := func(step, typ, condition, pubsubCondition string) {
		t.Helper()
		got, ok := field[slixError](t, report, step)
		if !ok {
			return
		}
		if got.IQError == nil {
			t.Errorf("%s: succeeded (%s), want a %s/%s error", step, report[step], typ, condition)
			return
		}
		if e := got.IQError; e.Type != typ || e.Condition != condition || e.PubsubCondition != pubsubCondition {
			t.Errorf("%s: error %s/%s/%s (%q), want %s/%s/%s", step, e.Type, e.Condition, e.PubsubCondition, e.Text, typ, condition, pubsubCondition)
		}
	}
	wantOK := func(step string) {
		t.Helper()
		if got, ok := field[string](t, report, step); ok && got != "ok" {
			t.Errorf("%s: %s", step, got)
		}
	}
	wantEvents := func(step string, want ...slixEvent) []slixEvent {
		t.Helper()
		got, ok := field[[]slixEvent](t, report, step)
		if !ok {
			return nil
		}
		var brief []slixEvent
		for _, ev := range got {
			brief = append(brief, slixEvent{Kind: ev.Kind, Node: ev.Node, ID: ev.ID, JID: ev.JID, Subscription: ev.Subscription})
		}
		if !slices.Equal(brief, want) {
			t.Errorf("%s: events %+v, want exactly %+v", step, brief, want)
		}
		return got
	}
	wantItems := func(step string, ids ...string) []slixItem {
		t.Helper()
		got, ok := field[[]slixItem](t, report, step)
		if !ok {
			return nil
		}
		var gotIDs []string
		for _, it := range got {
			gotIDs = append(gotIDs, it.ID)
		}
		if !slices.Equal(gotIDs, ids) {
			t.Errorf("%s: items %q, want %q", step, gotIDs, ids)
		}
		return got
	}
	wantIDs := func(step string, ids ...string) {
		t.Helper()
		if got, ok := field[[]string](t, report, step); ok && !slices.Equal(got, ids) {
			t.Errorf("%s: %q, want %q", step, got, ids)
		}
	}
	wantEntry := func(step string, ev slixEntry, title string) {
		t.Helper()
		if ev.NS != nsAtomTest || ev.Title != title || ev.ID == "" || ev.Link == "" || ev.Updated == "" {
			t.Errorf("%s: Atom entry %+v, want id, title %q, link and updated in %s", step, ev, title, nsAtomTest)
		}
	}

	// Discovery of the service.
	if info, ok := field[struct {
		Identities [][]any `json:"identities"`
		Features   []string
	}](t, report, "disco_info"); ok {
		if !slices.ContainsFunc(info.Identities, func(id []any) bool { return len(id) >= 2 && id[0] == "pubsub" && id[1] == "service" }) {
			t.Errorf("disco#info identities %v, want pubsub/service", info.Identities)
		}
		// Every advertised feature is one this test exercises.
		exercised := map[string]string{
			"access-open": "subscribe", "access-whitelist": "closed_node_subscribe",
			"config-node": "owner_config_set", "config-node-max": "owner_config_max", "create-and-configure": "owner_create",
			"create-nodes": "owner_create", "delete-items": "owner_retract",
			"delete-nodes": "owner_delete", "instant-nodes": "owner_instant_node",
			"item-ids": "items_by_id", "manage-subscriptions": "owner_subscriptions",
			"member-affiliation": "owned_subscribe_as_member", "meta-data": "disco_info_node",
			"modify-affiliations": "owner_affiliation_member", "outcast-affiliation": "outcast_subscribe",
			"persistent-items": "items_all", "publish": "owner_publish", "publish-options": "owner_publish_options",
			"publisher-affiliation": "publisher_publish", "purge-nodes": "owner_purge",
			"retract-items": "owner_retract", "retrieve-affiliations": "owner_affiliations",
			"retrieve-default": "owner_default_config", "retrieve-items": "items_all",
			"retrieve-subscriptions": "subscriptions", "subscribe": "subscribe", "rsm": "items_page",
			"subscription-notifications": "owner_affiliation_none",
			"subscription-options":       "subscription_options_set", "retrieve-default-sub": "subscription_options_default",
		}
		for _, f := range []string{nsDiscoInfoTest, nsDiscoItemsTest, nsPubsubTest} {
			if !slices.Contains(info.Features, f) {
				t.Errorf("disco#info lacks feature %s", f)
			}
		}
		for _, f := range info.Features {
			name, isPubsub := strings.CutPrefix(f, nsPubsubTest+"#")
			if isPubsub && exercised[name] == "" {
				t.Errorf("disco#info advertises %s, which this test does not exercise: add a step for it", f)
			}
		}
		for name := range exercised {
			if !slices.Contains(info.Features, nsPubsubTest+"#"+name) {
				t.Errorf("disco#info does not advertise %s#%s, which works (step %s)", nsPubsubTest, name, exercised[name])
			}
		}
	}
	if items, ok := field[[][]any](t, report, "disco_items"); ok {
		for _, want := range [][]any{{comp, "news", "News"}, {comp, "private", "Private"}} {
			if !slices.ContainsFunc(items, func(it []any) bool { return slices.Equal(it, want) }) {
				t.Errorf("disco#items %v lacks %v", items, want)
			}
		}
	}
	if info, ok := field[struct {
		Node       string
		Identities [][]any `json:"identities"`
		Features   []string
		slixForm
	}](t, report, "disco_info_node"); ok {
		if info.Node != "news" || !slices.ContainsFunc(info.Identities, func(id []any) bool { return len(id) >= 2 && id[0] == "pubsub" && id[1] == "leaf" }) ||
			!slices.Contains(info.Features, nsPubsubTest) {
			t.Errorf("disco#info on the node: %+v", info)
		}
		if info.FormType != "result" || info.Fields["FORM_TYPE"] != nsPubsubTest+"#meta-data" ||
			info.Fields["pubsub#title"] != "News" || info.Fields["pubsub#access_model"] != "open" {
			t.Errorf("node meta-data form: %s %v", info.FormType, info.Fields)
		}
	}
	wantError("disco_info_unknown_node", "cancel", "item-not-found", "")

	// A subscriber.
	wantError("subscribe_unknown_node", "cancel", "item-not-found", "")
	wantError("subscribe_someone_else", "modify", "bad-request", "invalid-jid")
	first, _ := field[slixSubscription](t, report, "subscribe")
	if first.Subscription != "subscribed" || first.Node != "news" || first.JID != reader || first.SubID == "" {
		t.Errorf("subscribe: %+v", first)
	}
	if again, ok := field[slixSubscription](t, report, "subscribe_again"); ok && again != first {
		t.Errorf("subscribing again gave %+v, want the existing subscription %+v", again, first)
	}
	if subs, ok := field[[]slixSubscription](t, report, "subscriptions"); ok && (len(subs) != 1 || subs[0] != first) {
		t.Errorf("subscriptions after subscribing twice: %+v, want only %+v", subs, first)
	}
	// Subscription options (XEP-0060 §6.3): read, changed, and the defaults.
	for step, want := range map[string]string{"subscription_options": "1", "subscription_options_set": "0", "subscription_options_default": "1"} {
		if got, ok := field[slixForm](t, report, step); ok && (got.FormType != "form" ||
			got.Fields["FORM_TYPE"] != nsPubsubTest+"#subscribe_options" || got.Fields["pubsub#include_body"] != want) {
			t.Errorf("%s: %s %v, want a subscribe_options form with include_body %s", step, got.FormType, got.Fields, want)
		}
	}
	for i, ev := range wantEvents("notifications", slixEvent{Kind: "publish", Node: "news", ID: "slix-1"}, slixEvent{Kind: "publish", Node: "news", ID: "slix-2"}) {
		if ev.Entry == nil {
			t.Errorf("notification %d carries no Atom entry", i)
			continue
		}
		wantEntry("notifications", *ev.Entry, []string{"Slix one", "Slix two"}[i])
	}
	// The feed's entry at the node's first fetch is its first item.
	for _, it := range wantItems("items_all", "slix-2", "slix-1", "old-1") {
		if it.Entry == nil {
			t.Errorf("items_all: item %s has no payload", it.ID)
		}
	}
	wantItems("items_max_1", "slix-2")
	if got, ok := field[struct {
		IDs   []string `json:"ids"`
		First string   `json:"first"`
		Count string   `json:"count"`
	}](t, report, "items_page"); ok && (!slices.Equal(got.IDs, []string{"slix-2"}) || got.First != "slix-2" || got.Count != "3") {
		t.Errorf("items_page: %+v, want slix-2 alone, first slix-2, count 3", got)
	}
	if got := wantItems("items_by_id", "slix-1"); len(got) == 1 && got[0].Entry != nil {
		wantEntry("items_by_id", *got[0].Entry, "Slix one")
	}
	if items, ok := field[[][]any](t, report, "disco_items_node"); ok {
		var names []string
		for _, it := range items {
			if len(it) == 3 && it[0] == comp {
				names = append(names, it[2].(string))
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"old-1", "slix-1", "slix-2"}) {
			t.Errorf("disco#items on the node: %v, want the item ids as names", items)
		}
	}
	wantOK("unsubscribe")
	wantEvents("notifications_after_unsubscribe")
	if subs, ok := field[[]slixSubscription](t, report, "subscriptions_after_unsubscribe"); ok && len(subs) != 0 {
		t.Errorf("subscriptions after unsubscribing: %+v", subs)
	}

	// The whitelist node: XEP-0060 §6.1.3.4 for subscribing, and the same
	// error for retrieving its items.
	wantError("closed_node_subscribe", "cancel", "not-allowed", "closed-node")
	wantError("closed_node_items", "cancel", "not-allowed", "closed-node")

	// Owner use cases, as the admin JID.
	if got, ok := field[map[string]string](t, report, "owner_create"); ok && got["node"] != "slix-owned" {
		t.Errorf("create: %v", got)
	}
	wantError("other_create", "auth", "forbidden", "")
	if got, ok := field[slixForm](t, report, "owner_config_get"); ok {
		if got.FormType != "form" || got.Fields["FORM_TYPE"] != nsPubsubTest+"#node_config" ||
			got.Fields["pubsub#title"] != "Owned by slixmpp" || got.Fields["pubsub#access_model"] != "whitelist" {
			t.Errorf("configuration form after create-and-configure: %+v", got)
		}
	}
	if got, ok := field[slixForm](t, report, "owner_default_config"); ok {
		if got.Fields["FORM_TYPE"] != nsPubsubTest+"#node_config" || got.Fields["pubsub#access_model"] == nil {
			t.Errorf("default configuration: %+v", got)
		}
	}
	if got, ok := field[struct {
		Node   string
		Listed bool
	}](t, report, "owner_instant_node"); ok && (got.Node == "" || !got.Listed) {
		t.Errorf("instant node: %+v", got)
	}
	wantOK("owner_config_set")
	if got, ok := field[slixForm](t, report, "owner_config_after_set"); ok &&
		(got.Fields["pubsub#title"] != "Renamed by slixmpp" || got.Fields["pubsub#max_items"] != "7") {
		t.Errorf("configuration after submitting a form: %+v", got)
	}
	if got, ok := field[string](t, report, "owner_config_max"); ok && got != "1000" {
		t.Errorf("pubsub#max_items after submitting max: %q, want 1000, pingd's largest", got)
	}
	wantError("owned_subscribe_before_member", "cancel", "not-allowed", "closed-node")
	wantOK("owner_affiliation_member")
	wantAffiliations := func(step string, want ...[]string) {
		t.Helper()
		if got, ok := field[[][]string](t, report, step); ok && !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("%s: %q, want %q", step, got, want)
		}
	}
	wantAffiliations("owner_affiliations", []string{owner, "owner"}, []string{reader, "member"})
	if got, ok := field[string](t, report, "owned_subscribe_as_member"); ok && got != "subscribed" {
		t.Errorf("a member subscribing: %s", got)
	}
	wantAffiliations("member_own_affiliations", []string{"slix-owned", "member"})
	if got, ok := field[slixForm](t, report, "admin_config_of_api_node"); ok && (got.FormType != "form" || got.Fields["pubsub#title"] != "News") {
		t.Errorf("the admin configuring a node made over HTTP: %+v", got)
	}
	if got, ok := field[struct {
		IDs    []string    `json:"ids"`
		Events []slixEvent `json:"events"`
	}](t, report, "owner_publish_without_id"); ok && (len(got.IDs) != 1 || got.IDs[0] == "" || len(got.Events) != 1 || got.Events[0].ID != got.IDs[0]) {
		t.Errorf("publishing without an item id (the service makes one, XEP-0060 §7.1.2): %+v", got)
	}
	if got, ok := field[struct {
		IDs    []string    `json:"ids"`
		Events []slixEvent `json:"events"`
	}](t, report, "owner_publish"); ok {
		if !slices.Equal(got.IDs, []string{"p1"}) || len(got.Events) != 1 || got.Events[0].ID != "p1" || got.Events[0].Entry == nil {
			t.Errorf("publish: %+v", got)
		} else {
			wantEntry("owner_publish", *got.Events[0].Entry, "Published by slixmpp")
		}
	}
	wantIDs("owner_items_after_publish", "p1")
	if got, ok := field[struct {
		IDs []string `json:"ids"`
	}](t, report, "owner_publish_options"); ok && !slices.Equal(got.IDs, []string{"po1"}) {
		t.Errorf("publish with a precondition the node meets: %+v", got)
	}
	wantError("owner_publish_options_unmet", "cancel", "conflict", "precondition-not-met")
	wantEvents("owner_retract", slixEvent{Kind: "retract", Node: "slix-owned", ID: "p1"})
	wantIDs("owner_items_after_retract")
	wantError("owner_retract_unknown", "cancel", "item-not-found", "")
	wantEvents("owner_purge", slixEvent{Kind: "purge", Node: "slix-owned"})
	wantIDs("owner_items_after_purge")
	wantError("member_publish", "auth", "forbidden", "")
	wantOK("owner_affiliation_publisher")
	if got, ok := field[struct {
		IDs    []string    `json:"ids"`
		Events []slixEvent `json:"events"`
	}](t, report, "publisher_publish"); ok && (!slices.Equal(got.IDs, []string{"r2"}) || len(got.Events) != 1 || got.Events[0].ID != "r2") {
		t.Errorf("publishing as a publisher: %+v", got)
	}
	wantIDs("owner_items_after_publisher", "r2")
	if got, ok := field[[][]string](t, report, "owner_subscriptions"); ok && !slices.EqualFunc(got, [][]string{{reader, "subscribed"}}, slices.Equal) {
		t.Errorf("the owner's subscription list: %q", got)
	}
	wantEvents("owner_affiliation_none", slixEvent{Kind: "subscription", Node: "slix-owned", JID: reader, Subscription: "none"})
	wantAffiliations("owner_affiliations_after_none", []string{owner, "owner"})
	if got, ok := field[[][]string](t, report, "owner_subscriptions_after_none"); ok && len(got) != 0 {
		t.Errorf("subscriptions left after the membership ended: %q", got)
	}
	wantError("outcast_subscribe", "auth", "forbidden", "")
	if got, ok := field[struct {
		Newest      []slixEvent `json:"newest"`
		Events      []slixEvent `json:"events"`
		StillListed bool        `json:"still_listed"`
	}](t, report, "owner_delete"); ok {
		if len(got.Newest) != 1 || got.Newest[0].Kind != "publish" || got.Newest[0].ID != "r2" {
			t.Errorf("delete: subscribing first sent %+v, want the newest item r2", got.Newest)
		}
		if len(got.Events) != 1 || got.Events[0].Kind != "delete" || got.StillListed {
			t.Errorf("delete: %+v", got)
		}
	}
	wantError("owner_delete_again", "cancel", "item-not-found", "")

	// Chat commands: each answered by one chat message from the component.
	chat := func(step string, words ...string) {
		t.Helper()
		got, ok := field[[]slixChat](t, report, "chat_"+step)
		if !ok {
			return
		}
		if len(got) != 1 || got[0].Type != "chat" || !strings.HasPrefix(got[0].From, comp) {
			t.Errorf("chat %s: answers %+v, want one chat message from %s", step, got, comp)
			return
		}
		for _, w := range words {
			if !strings.Contains(strings.ToLower(got[0].Body), strings.ToLower(w)) {
				t.Errorf("chat %s: answer %q does not mention %q", step, got[0].Body, w)
			}
		}
	}
	chat("help", "help", "nodes", "list", "subscribe", "unsubscribe", "last")
	chat("gibberish", "did not understand", "help", "subscribe")
	chat("nodes", "news", "private")
	chat("list_empty", "no subscriptions")
	chat("subscribe", "subscribed", "news")
	chat("subscribe_again", "already", "news")
	chat("list", "news")
	chat("last", "Slix three", "Slix two")
	chat("last_closed", "private", "closed")
	chat("subscribe_closed", "private", "closed")
	chat("unknown_node", "no-such-node")
	chat("unsubscribe", "unsubscribed", "news")
	chat("list_after", "no subscriptions")
	if got, ok := field[[]slixChat](t, report, "chat_subscribe_newest"); ok &&
		(len(got) != 1 || got[0].Type != "chat" || !strings.Contains(got[0].Body, "Slix three")) {
		t.Errorf("after subscribing by chat: %+v, want the newest entry (Slix three) as one chat message", got)
	}
	if got, ok := field[[]string](t, report, "chat_subscription_in_pubsub"); ok && !slices.Equal(got, []string{"news"}) {
		t.Errorf("after subscribing by chat, XEP-0060 subscriptions: %q", got)
	}
	if got, ok := field[struct {
		Notes []struct {
			Type  string `json:"type"`
			Body  string `json:"body"`
			URL   string `json:"url"`
			Event bool   `json:"event"`
		} `json:"notes"`
		Events []slixEvent `json:"events"`
	}](t, report, "chat_subscriber_notified"); ok {
		if len(got.Notes) != 1 || got.Notes[0].Type != "chat" || !strings.Contains(got.Notes[0].Body, "For the chat subscriber") ||
			got.Notes[0].URL == "" || got.Notes[0].Event || len(got.Events) != 0 {
			t.Errorf("chat_subscriber_notified: %+v, want one plain chat message with the title and an XEP-0066 link, no event", got)
		}
	}

	// An affiliation set over XMPP is the node's whitelist over HTTP.
	if got, ok := field[string](t, report, "whitelist_member_subscribe"); ok && got != "subscribed" {
		t.Errorf("a JID the admin made a member over XMPP subscribing: %s", got)
	}
	var wl struct {
		Whitelist []struct {
			JID string `json:"jid"`
		} `json:"whitelist"`
	}
	member := false
	code := e.d.api("GET", "/api/nodes/private/whitelist", nil, &wl)
	for _, m := range wl.Whitelist {
		member = member || m.JID == "other@"+domain
	}
	if code != 200 || !member {
		t.Errorf("whitelist over HTTP after the XMPP affiliation: HTTP %d %+v", code, wl)
	}

	if t.Failed() || testing.Verbose() {
		raw, _ := json.MarshalIndent(report, "", " ")
		t.Logf("slixmpp report:\n%s", raw)
	}
}

const (
	nsAtomTest       = "http://www.w3.org/2005/Atom"
	nsPubsubTest     = "http://jabber.org/protocol/pubsub"
	nsDiscoInfoTest  = "http://jabber.org/protocol/disco#info"
	nsDiscoItemsTest = "http://jabber.org/protocol/disco#items"
)
