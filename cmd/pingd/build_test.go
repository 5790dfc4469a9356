package main

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/hub"
)

// TestOutboundSharesOneClient: every part that calls out gets the one
// guarded client's connection pool and pingd's one User-Agent; the
// clients of deliveries, relays and upstream requests take a redirect as
// the answer, while page look-ups follow it.
func TestOutboundSharesOneClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/here", http.StatusMovedPermanently)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	out := newOutbound(&Config{PublicURL: "https://pingd.example", AllowPrivate: true})
	if want := "pingd/" + version + " (+https://pingd.example)"; out.userAgent != want || out.resolver.UserAgent != want {
		t.Errorf("User-Agent %q, the resolver's %q; want %q", out.userAgent, out.resolver.UserAgent, want)
	}
	if out.resolver.HTTP != out.client {
		t.Error("the resolver has a client of its own")
	}
	if out.checkHost != nil {
		t.Error("private addresses are allowed, yet hosts are checked")
	}
	if newOutbound(&Config{PublicURL: "https://pingd.example"}).checkHost == nil {
		t.Error("private addresses are refused, yet hosts are not checked when asked for")
	}
	strict := out.noRedirects()
	if strict.Transport != out.client.Transport {
		t.Error("the no-redirect client has a connection pool of its own")
	}
	resp, err := strict.Get(srv.URL + "/moved")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently {
		t.Errorf("no-redirect client: status %d, want the 301 itself", resp.StatusCode)
	}
	resp, err = out.client.Get(srv.URL + "/moved")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("following client: status %d, want the redirect followed to 204", resp.StatusCode)
	}
}

// TestEveryHTTPKindHasASender: each HTTP kind of hub's registry has its
// line in deliverySenders, and the check that refuses to start without
// one names the kind left out.
func TestEveryHTTPKindHasASender(t *testing.T) {
	senders := deliverySenders(&Config{}, delivery.HTTPSender{}, nil)
	if missing := kindsWithoutSender(senders); len(missing) > 0 {
		t.Fatalf("HTTP kinds without a sender: %v", missing)
	}
	if len(senders) != len(hub.HTTPKinds()) {
		t.Fatalf("%d senders for the %d HTTP kinds %v", len(senders), len(hub.HTTPKinds()), hub.HTTPKinds())
	}
	delete(senders, hub.KindCNWS)
	if missing := kindsWithoutSender(senders); !slices.Equal(missing, []hub.Kind{hub.KindCNWS}) {
		t.Fatalf("without the CNWS sender, missing = %v", missing)
	}
}

// TestSendersAgreeWithTheKindRegistry: a sender takes what hub's registry
// says its kind gets: every sender takes new items, and only the senders
// of kinds that are not item-level take a bare "this URL changed".
func TestSendersAgreeWithTheKindRegistry(t *testing.T) {
	for kind, sender := range deliverySenders(&Config{}, delivery.HTTPSender{}, nil) {
		sub := &hub.Subscription{Kind: kind}
		if !sender.Wants(sub, hub.Event{Kind: hub.EventItem, ItemID: "a"}) {
			t.Errorf("%s: the sender does not take a new item", kind)
		}
		if got := sender.Wants(sub, hub.Event{Kind: hub.EventChange}); got == kind.ItemLevel() {
			t.Errorf("%s: item-level %v, yet the sender takes a bare change: %v", kind, kind.ItemLevel(), got)
		}
	}
}
