package soap

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// TestCallRoundTrip: what MarshalCall writes, DecodeCall reads back:
// strings, ints (as text) and lists, escaped.
func TestCallRoundTrip(t *testing.T) {
	body, err := MarshalCall("pleaseNotify",
		Param{"notifyProcedure", "rssCloud.notify"}, Param{"port", 8080}, Param{"path", "/upstream/rsscloud/7"},
		Param{"protocol", "soap"}, Param{"urlList", []string{"http://a.example/feed?x=1&y=<2>", "http://b.example/"}},
		Param{"domain", "pingd.example"})
	if err != nil {
		t.Fatal(err)
	}
	call, err := DecodeCall(body)
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	want := &Call{Method: "pleaseNotify", Params: []any{"rssCloud.notify", "8080", "/upstream/rsscloud/7", "soap",
		[]any{"http://a.example/feed?x=1&y=<2>", "http://b.example/"}, "pingd.example"}}
	if !reflect.DeepEqual(call, want) {
		t.Errorf("decoded %+v\nwant    %+v", call, want)
	}
	for _, bad := range []struct {
		proc string
		p    Param
	}{{"a:b", Param{"url", "x"}}, {"ok", Param{"1bad", "x"}}, {"ok", Param{"x", 1.5}}} {
		if _, err := MarshalCall(bad.proc, bad.p); err == nil {
			t.Errorf("MarshalCall(%q, %+v): no error", bad.proc, bad.p)
		}
	}
}

func TestDecodeCallRefuses(t *testing.T) {
	for _, body := range []string{
		``,
		`<Envelope><Body><ping/></Body></Envelope>`, // not the SOAP namespace
		`<e:Envelope xmlns:e="http://schemas.xmlsoap.org/soap/envelope/"><e:Body><a/><b/></e:Body></e:Envelope>`,
		`<?xml version="1.0" encoding="ISO-8859-1"?><e:Envelope xmlns:e="http://schemas.xmlsoap.org/soap/envelope/"><e:Body><a/></e:Body></e:Envelope>`,
	} {
		if c, err := DecodeCall([]byte(body)); err == nil {
			t.Errorf("DecodeCall(%q) = %+v", body, c)
		}
	}
}

func TestDecodeBoolResponse(t *testing.T) {
	env := func(inner string) []byte {
		return []byte(`<e:Envelope xmlns:e="http://schemas.xmlsoap.org/soap/envelope/"><e:Body>` + inner + `</e:Body></e:Envelope>`)
	}
	for _, tc := range []struct {
		body []byte
		want bool
		err  bool
	}{
		{MarshalResponse("pleaseNotify", true), true, false},
		{MarshalResponse("pleaseNotify", false), false, false},
		{env(`<m:notifyResponse xmlns:m="urn:x"><Result> 1 </Result></m:notifyResponse>`), true, false},
		{env(`<r><ok>0</ok></r>`), false, false},
		{env(`<r><ok>maybe</ok></r>`), false, true},
		{env(`<r/>`), false, true},
		{[]byte(`true`), false, true},
		{MarshalFault(FaultClient, "no such procedure"), false, true},
	} {
		got, err := DecodeBoolResponse(tc.body)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("DecodeBoolResponse(%s) = %v, %v", tc.body, got, err)
		}
	}
	_, err := DecodeBoolResponse(MarshalFault(FaultServer, "try later"))
	var fe *FaultError
	if !errors.As(err, &fe) || fe.Message != "try later" {
		t.Errorf("fault: %v", err)
	}
}

func TestIsCall(t *testing.T) {
	for h, want := range map[*http.Header]bool{
		{"Soapaction": {`""`}}:                        true,
		{"Content-Type": {"application/soap+xml"}}:    true,
		{"Content-Type": {"text/xml; charset=utf-8"}}: false,
		{}: false,
	} {
		if got := IsCall(*h); got != want {
			t.Errorf("IsCall(%v) = %v", *h, got)
		}
	}
	if a := Action("pleaseNotify"); a != `"/pleaseNotify"` {
		t.Errorf("Action = %s", a)
	}
	if !strings.Contains(string(MarshalFault(FaultClient, "a < b")), "<faultstring>a &lt; b</faultstring>") {
		t.Error("the fault message is not escaped")
	}
}

func TestFaultString(t *testing.T) {
	for body, want := range map[string]string{
		``:        "",
		`not xml`: "",
		`<x:Envelope xmlns:x="http://schemas.xmlsoap.org/soap/envelope/"><x:Body><ok/></x:Body></x:Envelope>`:                                                "",
		`<x:Envelope xmlns:x="http://schemas.xmlsoap.org/soap/envelope/"><x:Body><x:Fault><faultstring> boom </faultstring></x:Fault></x:Body></x:Envelope>`: "boom",
		`<x:Envelope xmlns:x="http://schemas.xmlsoap.org/soap/envelope/"><x:Body><x:Fault/></x:Body></x:Envelope>`:                                           "unspecified",
		// A Fault element of another namespace is not a SOAP fault.
		`<Envelope><Body><Fault><faultstring>x</faultstring></Fault></Body></Envelope>`: "",
	} {
		if got := FaultString([]byte(body)); got != want {
			t.Errorf("FaultString(%q) = %q, want %q", body, got, want)
		}
	}
}

func FuzzFaultString(f *testing.F) {
	f.Add([]byte(`<x:Envelope xmlns:x="http://schemas.xmlsoap.org/soap/envelope/"><x:Body><x:Fault><faultstring>boom</faultstring></x:Fault></x:Body></x:Envelope>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got := FaultString(body)
		if got != "" && len(got) > 1024+len("unspecified") {
			t.Fatalf("fault text not capped: %d bytes", len(got))
		}
	})
}
