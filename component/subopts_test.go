package component

import (
	"reflect"
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
)

// subOptionsSubmit builds a submitted subscribe_options form; each field is a
// name followed by its values, fields separated by "".
func subOptionsSubmit(fields ...[]string) string {
	var b strings.Builder
	b.WriteString(`<x xmlns="jabber:x:data" type="submit"><field var="FORM_TYPE" type="hidden"><value>` + formSubscribeOptions + `</value></field>`)
	for _, f := range fields {
		b.WriteString(`<field var="` + f[0] + `">`)
		for _, v := range f[1:] {
			b.WriteString(`<value>` + v + `</value>`)
		}
		b.WriteString(`</field>`)
	}
	b.WriteString(`</x>`)
	return b.String()
}

func TestApplySubOptionsForm(t *testing.T) {
	before := hub.Options{IncludeBody: false, MessageType: hub.NotifyNormal}
	f := func(name string, values ...string) []string { return append([]string{name}, values...) }
	cases := []struct {
		name   string
		fields [][]string
		want   *hub.Options // nil: refused with invalid-options
	}{
		{"what pingd offers", [][]string{f(fieldIncludeBody, "1"), f(fieldMessageType, "chat")},
			&hub.Options{IncludeBody: true, MessageType: hub.NotifyChat}},
		// XEP-0060 §6.3.5's example submission, with every presence state.
		{"what pingd does anyway", [][]string{f("pubsub#deliver", "1"), f("pubsub#digest", "0"), f("pubsub#digest_frequency", "86400000"),
			f(fieldIncludeBody, "true"), f("pubsub#show-values", "chat", "online", "away", "xa", "dnd"),
			f("pubsub#subscription_type", "items"), f("pubsub#subscription_depth", "1")},
			&hub.Options{IncludeBody: true, MessageType: hub.NotifyNormal, DigestFrequencyMS: 86400000}},
		{"fields without values", [][]string{f("pubsub#deliver"), f("pubsub#expire"), f("pubsub#frobnicate"), f("pubsub#show-values")}, &before},
		{"another namespace's field", [][]string{f("x-other#thing", "1"), f(fieldIncludeBody, "1")},
			&hub.Options{IncludeBody: true, MessageType: hub.NotifyNormal}},
		{"no delivery", [][]string{f(fieldIncludeBody, "1"), f("pubsub#deliver", "0")}, nil},
		{"no delivery, spelled false", [][]string{f("pubsub#deliver", "false")}, nil},
		{"deliver not a boolean", [][]string{f("pubsub#deliver", "yes")}, nil},
		{"digests", [][]string{f("pubsub#digest", "1"), f("pubsub#digest_frequency", "60000")},
			&hub.Options{MessageType: hub.NotifyNormal, Digest: true, DigestFrequencyMS: 60000}},
		{"digests at the default frequency", [][]string{f("pubsub#digest", "true")},
			&hub.Options{MessageType: hub.NotifyNormal, Digest: true}},
		{"plain messages", [][]string{f(fieldFormat, hub.FormatMessage)},
			&hub.Options{Format: hub.FormatMessage, MessageType: hub.NotifyNormal}},
		{"digest not a boolean", [][]string{f("pubsub#digest", "often")}, nil},
		{"a digest frequency that is not one", [][]string{f("pubsub#digest_frequency", "daily")}, nil},
		{"digests too often", [][]string{f("pubsub#digest", "1"), f("pubsub#digest_frequency", "999")}, nil},
		{"digests too seldom", [][]string{f("pubsub#digest", "1"), f("pubsub#digest_frequency", "604800001")}, nil},
		{"an unknown format", [][]string{f(fieldFormat, "smoke")}, nil},
		{"some presence states only", [][]string{f("pubsub#show-values", "chat", "online", "away")}, nil},
		{"an unknown show value", [][]string{f("pubsub#show-values", "chat", "online", "away", "xa", "dnd", "busy")}, nil},
		{"an expiry", [][]string{f("pubsub#expire", "2030-01-01T00:00:00Z")}, nil},
		{"new nodes", [][]string{f("pubsub#subscription_type", "nodes")}, nil},
		{"a depth", [][]string{f("pubsub#subscription_depth", "2")}, nil},
		{"an unknown pubsub field", [][]string{f("pubsub#frobnicate", "1")}, nil},
		{"an unknown field of pingd's", [][]string{f("x-pingd#frobnicate", "1")}, nil},
		{"diffs", [][]string{f(fieldDiff, hub.DiffPatchOps)},
			&hub.Options{MessageType: hub.NotifyNormal, Diff: hub.DiffPatchOps}},
		{"diffs by RFC 7351's name, in capitals", [][]string{f(fieldDiff, "Application/XML-Patch+XML")},
			&hub.Options{MessageType: hub.NotifyNormal, Diff: hub.DiffPatchOps}},
		{"no diff", [][]string{f(fieldDiff, "none")}, &before},
		{"an unknown diff", [][]string{f(fieldDiff, "application/json-patch+json")}, nil},
		{"a diff without a value", [][]string{f(fieldDiff)}, nil},
		{"two diffs", [][]string{f(fieldDiff, "none", hub.DiffPatchOps)}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, serr := applySubOptionsForm(before, mustParse(t, subOptionsSubmit(tc.fields...)))
			if tc.want == nil {
				if serr == nil || serr.App != "invalid-options" || serr.Condition != "bad-request" {
					t.Fatalf("accepted (%+v, %v), want bad-request + invalid-options", got, serr)
				}
				if !reflect.DeepEqual(got, before) {
					t.Errorf("refused, yet the options became %+v", got)
				}
				return
			}
			if serr != nil {
				t.Fatalf("refused: %v", serr)
			}
			if !reflect.DeepEqual(got, *tc.want) {
				t.Errorf("options %+v, want %+v", got, *tc.want)
			}
		})
	}
}

// TestDiffOption: the options form lists x-pingd#diff with a label and
// its two values, a form sent back unchanged keeps the options, and a
// diff pingd does not make is refused with a text naming the field.
func TestDiffOption(t *testing.T) {
	for _, opts := range []hub.Options{
		{Format: hub.FormatPubsub, IncludeBody: true, MessageType: hub.NotifyChat, DigestFrequencyMS: 60000, Diff: hub.DiffPatchOps},
		{Format: hub.FormatPubsub, MessageType: hub.NotifyHeadline, DigestFrequencyMS: 60000},
	} {
		rendered := formBytes(subOptionsForm(opts, nil, false))
		x := mustParse(t, string(rendered))
		var field *element
		for _, fl := range x.childrenNamed(nsDataForms, "field") {
			if fl.attr("var") == fieldDiff {
				field = fl
			}
		}
		if field == nil {
			t.Fatalf("the options form lists no %s:\n%s", fieldDiff, rendered)
		}
		var values []string
		for _, o := range field.childrenNamed(nsDataForms, "option") {
			values = append(values, o.child(nsDataForms, "value").text())
		}
		want := "none"
		if opts.Diff != "" {
			want = opts.Diff
		}
		if field.attr("type") != "list-single" || field.attr("label") == "" ||
			!reflect.DeepEqual(values, []string{"none", hub.DiffPatchOps}) || field.child(nsDataForms, "value").text() != want {
			t.Errorf("the %s field: %s, want a labelled list-single of none and %s with %s chosen", fieldDiff, field.standalone(), hub.DiffPatchOps, want)
		}
		// What a client does: take the form, change its type to submit, send it back.
		submitted := strings.Replace(string(rendered), `type="form"`, `type="submit"`, 1)
		got, serr := applySubOptionsForm(hub.Options{}, mustParse(t, submitted))
		if serr != nil || !reflect.DeepEqual(got, opts) {
			t.Errorf("round trip gave %+v, %v; want %+v\n%s", got, serr, opts, rendered)
		}
	}
	_, serr := applySubOptionsForm(hub.Options{}, mustParse(t, subOptionsSubmit([]string{fieldDiff, "text/x-diff"})))
	if serr == nil || serr.Condition != "bad-request" || serr.App != "invalid-options" ||
		!strings.Contains(serr.Text, fieldDiff) || !strings.Contains(serr.Text, "text/x-diff") {
		t.Errorf("an unknown diff: %+v, want bad-request + invalid-options with a text naming the field and the value", serr)
	}
}
