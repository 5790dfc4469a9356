package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHandlersRefuseMissingDependencies: a handler built without what it
// needs says so when it is built, not at its first request.
func TestHandlersRefuseMissingDependencies(t *testing.T) {
	e := newEnv(t)
	site := Site{PublicURL: "http://pingd.test"}
	gate, err := NewAdminGate(AdminGateConfig{Tokens: e.hub})
	if err != nil {
		t.Fatal(err)
	}
	rpc, err := NewRPC(RPCConfig{Site: site})
	if err != nil {
		t.Fatal(err)
	}
	for name, build := range map[string]func() error{
		"admin gate without a token check": func() error { _, err := NewAdminGate(AdminGateConfig{}); return err },
		"pings without the XML-RPC endpoint": func() error {
			_, err := NewPings(PingsConfig{Site: site, Hub: e.hub, Limits: NewPingLimits(PingLimitsConfig{})})
			return err
		},
		"rssCloud without subscription limits": func() error {
			_, err := NewRSSCloud(RSSCloudConfig{Site: site, Hub: e.hub, RPC: rpc})
			return err
		},
		"admin API with relay targets and no relay queue": func() error {
			_, err := NewAdmin(AdminConfig{Site: site, Hub: e.hub, Gate: gate, RelayTargets: []string{"http://relay.test/RPC2"}})
			return err
		},
		"pages without a store": func() error {
			_, err := NewPages(PagesConfig{Site: site, Hub: e.hub, Gate: gate})
			return err
		},
		"pages with an unknown rssCloud protocol": func() error {
			_, err := NewPages(PagesConfig{Site: site, Hub: e.hub, Store: e.store, Gate: gate, CloudProtocol: "carrier-pigeon"})
			return err
		},
		"lists with a relative public URL": func() error {
			_, err := NewLists(ListsConfig{Site: Site{PublicURL: "/pingd"}, Hub: e.hub, Gate: gate})
			return err
		},
		"router without the admin gate": func() error { _, err := NewRouter(RouterConfig{}, rpc); return err },
	} {
		err := build()
		if err == nil {
			t.Errorf("%s: built", name)
		} else if !strings.HasPrefix(err.Error(), "httpapi: ") {
			t.Errorf("%s: error %q does not say where it comes from", name, err)
		}
	}
}

// TestListsWithoutArchive: lists built without an archive answer every
// hour 404 saying so, and serve changes.xml as before.
func TestListsWithoutArchive(t *testing.T) {
	e := newEnv(t)
	gate, err := NewAdminGate(AdminGateConfig{Tokens: e.hub})
	if err != nil {
		t.Fatal(err)
	}
	lists, err := NewLists(ListsConfig{Site: Site{PublicURL: "http://pingd.test"}, Hub: e.hub, Gate: gate})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := NewRouter(RouterConfig{Admin: gate}, lists)
	if err != nil {
		t.Fatal(err)
	}
	// The hour running now: HH.xml is the hour that ends at HH.
	now := e.clock.Now().UTC()
	hour := fmt.Sprintf("/%s/%02d.xml", now.Format("2006/01/02"), now.Hour()+1)
	rec := newRecorder()
	rt.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, hour, nil))
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "keeps no ping archive") {
		t.Errorf("archive without a store: HTTP %d %q", rec.Code, rec.Body.String())
	}
	rec = newRecorder()
	rt.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/changes.xml", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("changes.xml: HTTP %d", rec.Code)
	}
}
