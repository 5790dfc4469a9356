package websub

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
)

func TestParseRequest(t *testing.T) {
	req, err := ParseRequest(url.Values{"hub.mode": {"subscribe"}, "hub.callback": {" http://cb.example/x?y=1 "},
		"hub.topic": {"http://t.example/"}, "hub.lease_seconds": {"120"}, "hub.secret": {strings.Repeat("s", 199)},
		"pingd.signature_algorithm": {"SHA512"}, "other": {"ignored"}})
	if err != nil || req.Callback != "http://cb.example/x?y=1" || req.LeaseSeconds != 120 || len(req.Secret) != 199 || req.SigAlgo != "sha512" {
		t.Fatalf("%+v %v", req, err)
	}
	req, err = ParseRequest(url.Values{"hub.mode": {"publish"}, "hub.url": {"http://a/", "http://b/"}, "hub.topic": {"http://a/", "http://c/"}})
	if err != nil || strings.Join(req.URLs, " ") != "http://a/ http://b/ http://c/" {
		t.Fatalf("publish %+v %v", req, err)
	}
	for name, v := range map[string]url.Values{
		"callback fragment": {"hub.mode": {"subscribe"}, "hub.callback": {"http://cb/#f"}, "hub.topic": {"http://t/"}},
		"two callbacks":     {"hub.mode": {"subscribe"}, "hub.callback": {"http://a/", "http://b/"}, "hub.topic": {"http://t/"}},
		"lease text":        {"hub.mode": {"subscribe"}, "hub.callback": {"http://a/"}, "hub.topic": {"http://t/"}, "hub.lease_seconds": {"ten"}},
	} {
		if _, err := ParseRequest(v); !errors.Is(err, hub.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add("hub.mode=subscribe&hub.callback=http%3A%2F%2Fcb.example%2F&hub.topic=http%3A%2F%2Ft.example%2F&hub.lease_seconds=3600&hub.secret=x")
	f.Add("hub.mode=unsubscribe&hub.callback=https%3A%2F%2Fcb%2F%3Fa%3D1&hub.topic=http%3A%2F%2Ft%2F")
	f.Add("hub.mode=publish&hub.url=http%3A%2F%2Fa%2F&hub.url=http%3A%2F%2Fb%2F&hub.topic=http%3A%2F%2Fc%2F")
	f.Fuzz(func(t *testing.T, query string) {
		form, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		req, err := ParseRequest(form)
		if err != nil {
			if !errors.Is(err, hub.ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		switch req.Mode {
		case "publish":
			if len(req.URLs) == 0 || len(req.URLs) > 100 {
				t.Fatalf("publish with %d URLs", len(req.URLs))
			}
			for _, u := range req.URLs {
				if hub.ValidURL(u) != nil {
					t.Fatalf("accepted %q", u)
				}
			}
		case "subscribe", "unsubscribe":
			if hub.ValidURL(req.Callback) != nil || hub.ValidURL(req.Topic) != nil || strings.Contains(req.Callback, "#") {
				t.Fatalf("accepted %+v", req)
			}
			if len(req.Secret) >= 200 || req.LeaseSeconds < 0 {
				t.Fatalf("accepted %+v", req)
			}
		default:
			t.Fatalf("mode %q", req.Mode)
		}
	})
}
