package rsscloud

import (
	"errors"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
)

func TestParsePleaseNotifyForm(t *testing.T) {
	feed := "http://example.org/feed.xml"
	good := url.Values{"notifyProcedure": {""}, "port": {"5337"}, "path": {"notify"}, "protocol": {"http-post"},
		"url2": {"http://example.org/b"}, "url1": {feed}, "url10": {"http://example.org/c"}, "url3": {feed}, "extra": {"x"}}
	reg, err := ParsePleaseNotifyForm(good)
	if err != nil {
		t.Fatal(err)
	}
	want := Registration{Port: 5337, Path: "/notify", Protocol: "http-post",
		URLs: []string{feed, "http://example.org/b", "http://example.org/c"}}
	if !reflect.DeepEqual(reg, want) {
		t.Fatalf("got %+v\nwant %+v", reg, want)
	}
	if cb, err := reg.Callback("::ffff:10.1.2.3"); err != nil || cb != "http://10.1.2.3:5337/notify" {
		t.Fatalf("callback %q %v", cb, err)
	}
	if cb, err := reg.Callback("2001:db8::1"); err != nil || cb != "http://[2001:db8::1]:5337/notify" {
		t.Fatalf("IPv6 callback %q %v", cb, err)
	}
	reg.Domain, reg.Protocol = "example.net", "https-post"
	if cb, err := reg.Callback("10.1.2.3"); err != nil || cb != "https://example.net:5337/notify" {
		t.Fatalf("domain callback %q %v", cb, err)
	}

	bad := func(mod func(v url.Values)) url.Values {
		v := url.Values{}
		for k, vs := range good {
			v[k] = append([]string(nil), vs...)
		}
		mod(v)
		return v
	}
	for name, v := range map[string]url.Values{
		"port 0":          bad(func(v url.Values) { v.Set("port", "0") }),
		"port text":       bad(func(v url.Values) { v.Set("port", "http") }),
		"protocol":        bad(func(v url.Values) { v.Set("protocol", "xmlrpc") }),
		"xml-rpc no proc": bad(func(v url.Values) { v.Set("protocol", "xml-rpc") }),
		"soap bad proc":   bad(func(v url.Values) { v.Set("protocol", "soap"); v.Set("notifyProcedure", "a b") }),
		"path space":      bad(func(v url.Values) { v.Set("path", "/a b") }),
		"path fragment":   bad(func(v url.Values) { v.Set("path", "/a#b") }),
		"domain url":      bad(func(v url.Values) { v.Set("domain", "http://x.org") }),
		"domain port":     bad(func(v url.Values) { v.Set("domain", "x.org:80") }),
		"url invalid":     bad(func(v url.Values) { v.Set("url1", "file:///etc/passwd") }),
		"no urls":         {"port": {"80"}, "path": {"/"}, "protocol": {"http-post"}},
	} {
		if _, err := ParsePleaseNotifyForm(v); !errors.Is(err, hub.ErrInvalid) {
			t.Errorf("%s: want ErrInvalid, got %v", name, err)
		}
	}
	// xml-rpc with a procedure, registerProcedure as the field's other name.
	v := bad(func(v url.Values) {
		v.Set("protocol", "xml-rpc")
		v.Del("notifyProcedure")
		v.Set("registerProcedure", "a.b")
	})
	if reg, err := ParsePleaseNotifyForm(v); err != nil || reg.Procedure != "a.b" {
		t.Fatalf("registerProcedure: %+v %v", reg, err)
	}
}

func FuzzParsePleaseNotifyForm(f *testing.F) {
	f.Add("notifyProcedure=&port=80&path=/notify&protocol=http-post&url1=http%3A%2F%2Fexample.org%2Ffeed.xml")
	f.Add("notifyProcedure=a.b&port=5337&path=RPC2&protocol=xml-rpc&url1=http%3A%2F%2Fa%2F&url2=https%3A%2F%2Fb%2F&domain=example.net")
	f.Add("port=443&path=/&protocol=soap&notifyProcedure=notify&url=http%3A%2F%2Fx%2F")
	f.Fuzz(func(t *testing.T, query string) {
		form, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		reg, err := ParsePleaseNotifyForm(form)
		if err != nil {
			if !errors.Is(err, hub.ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		if reg.Port < 1 || reg.Port > 65535 || !strings.HasPrefix(reg.Path, "/") || !ValidProtocol(reg.Protocol) {
			t.Fatalf("accepted %+v", reg)
		}
		if len(reg.URLs) == 0 || len(reg.URLs) > MaxURLs {
			t.Fatalf("accepted %d URLs", len(reg.URLs))
		}
		for _, u := range reg.URLs {
			if hub.ValidURL(u) != nil {
				t.Fatalf("accepted URL %q", u)
			}
		}
		cb, err := reg.Callback("192.0.2.7")
		if err != nil {
			t.Fatalf("accepted registration has no callback: %v", err)
		}
		u, err := url.Parse(cb)
		if err != nil || (u.Hostname() != "192.0.2.7" && reg.Domain == "") || u.Port() != strconv.Itoa(reg.Port) {
			t.Fatalf("callback %q for %+v", cb, reg)
		}
		if reg.Domain != "" && !strings.EqualFold(u.Hostname(), strings.Trim(reg.Domain, "[]")) {
			t.Fatalf("callback %q does not go to domain %q", cb, reg.Domain)
		}
	})
}

func TestValidSOAPProcedure(t *testing.T) {
	for name, want := range map[string]bool{
		"notify": true, "rssNotify.v2": true, "_x-1": true,
		"": false, "1abc": false, "a b": false, "a:b": false, "<x>": false, strings.Repeat("a", 300): false,
	} {
		if got := ValidSOAPProcedure(name); got != want {
			t.Errorf("ValidSOAPProcedure(%q) = %v", name, got)
		}
	}
}
