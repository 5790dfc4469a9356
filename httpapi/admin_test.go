package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/nodeurl"
	"github.com/pingd/pingd/store"
)

func TestAdminAuthorization(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name, header string
		wantErr      bool
	}{
		{"missing", "", false},
		{"wrong token", "Bearer not-the-token", true},
		{"other scheme", "Basic " + testAdminToken, false},
		{"empty bearer", "Bearer ", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.header != "" {
				hdr = []string{"Authorization", tc.header}
			}
			resp := e.do(http.MethodGet, "/api/nodes", "", nil, hdr...)
			wantStatus(t, resp, http.StatusUnauthorized)
			www := resp.Header.Get("WWW-Authenticate")
			if !strings.HasPrefix(www, "Bearer") {
				t.Errorf("WWW-Authenticate = %q", www)
			}
			if tc.wantErr != strings.Contains(www, "invalid_token") {
				t.Errorf("WWW-Authenticate = %q", www)
			}
			if body := decodeJSON[map[string]string](t, resp); body["error"] == "" {
				t.Errorf("no error message: %v", body)
			}
		})
	}
	// Nothing was created by an unauthorised POST.
	resp := e.do(http.MethodPost, "/api/nodes", "wrong", strings.NewReader(`{"node":"x"}`))
	wantStatus(t, resp, http.StatusUnauthorized)
	if _, err := e.hub.Node(context.Background(), "x"); err == nil {
		t.Error("an unauthorised request created a node")
	}
	wantStatus(t, e.do(http.MethodGet, "/api/nodes", "Bearer", nil, "Authorization", "bearer "+testAdminToken), http.StatusOK)
}

// TestAdminMissesNeedTheToken: paths and methods under /api/ that no route
// takes answer 401 without the token, as the routes do, so strangers learn
// nothing of the admin API's shape; with it, 404 and 405 (with Allow) in
// the API's JSON error form.
func TestAdminMissesNeedTheToken(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/api", http.StatusNotFound},
		{http.MethodGet, "/api/", http.StatusNotFound},
		{http.MethodGet, "/api/nodes/demo/bogus", http.StatusNotFound},
		{http.MethodPut, "/api/nodes", http.StatusMethodNotAllowed},
	} {
		for _, token := range []string{"", "wrong"} {
			resp := e.do(tc.method, tc.path, token, nil)
			wantStatus(t, resp, http.StatusUnauthorized)
			if resp.Header.Get("Allow") != "" || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s with token %q: Allow %q, WWW-Authenticate %q", tc.method, tc.path, token,
					resp.Header.Get("Allow"), resp.Header.Get("WWW-Authenticate"))
			}
		}
		resp := e.do(tc.method, tc.path, testAdminToken, nil)
		wantStatus(t, resp, tc.status)
		if body := decodeJSON[map[string]string](t, resp); body["error"] == "" {
			t.Errorf("%s %s: no JSON error: %v", tc.method, tc.path, body)
		}
		if tc.status == http.StatusMethodNotAllowed && !strings.Contains(resp.Header.Get("Allow"), http.MethodPost) {
			t.Errorf("%s %s: Allow %q", tc.method, tc.path, resp.Header.Get("Allow"))
		}
	}
	// Outside /api/ a miss needs no token.
	wantStatus(t, e.do(http.MethodGet, "/apis", "", nil), http.StatusNotFound)
}

func TestAdminDisabledWithoutToken(t *testing.T) {
	e := newEnv(t)
	h, err := hub.New(hub.Config{Stores: store.HubStores(e.store)})
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(Config{Hub: h, Store: e.store, PublicURL: "http://localhost:8080"})
	if err != nil {
		t.Fatal(err)
	}
	for _, token := range []string{"", testAdminToken, " "} {
		req, _ := http.NewRequest(http.MethodGet, "/api/nodes", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := newRecorder()
		api.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("token %q: status %d, want 401", token, rec.Code)
		}
	}
}

func TestAdminNodes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	// Create: the source is unreachable, which is accepted.
	resp := e.admin(http.MethodPost, "/api/nodes", map[string]any{
		"node": "feeds/demo", "source": "http://127.0.0.1:1/feed.xml", "title": "Demo", "access_model": "whitelist",
	})
	wantStatus(t, resp, http.StatusCreated)
	if loc := resp.Header.Get("Location"); loc != "/api/nodes/feeds%2Fdemo" {
		t.Errorf("Location = %q", loc)
	}
	created := decodeJSON[map[string]any](t, resp)
	token, _ := created["token"].(string)
	if token == "" {
		t.Fatalf("no token in %v", created)
	}
	if created["name"] != "feeds/demo" || created["title"] != "Demo" || created["access_model"] != "whitelist" ||
		created["source"] != "http://127.0.0.1:1/feed.xml" || created["max_items"] != float64(hub.DefaultMaxItems) ||
		created["deliver_payloads"] != true || created["notification_type"] != "headline" || created["implicit"] != false {
		t.Errorf("created node = %v", created)
	}
	links, _ := created["links"].(map[string]any)
	wantLinks := map[string]any{
		"descriptor": "http://pingd.test:8080/feeds/feeds%2Fdemo",
		"xrds":       "http://pingd.test:8080/xrds/feeds%2Fdemo",
		"atom":       "http://pingd.test:8080/atom/feeds%2Fdemo",
		"rss":        "http://pingd.test:8080/rss/feeds%2Fdemo",
	}
	for k, v := range wantLinks {
		if links[k] != v {
			t.Errorf("links[%s] = %v, want %v", k, links[k], v)
		}
	}
	for _, k := range []string{"created", "updated", "last_seq"} {
		if _, ok := created[k]; !ok {
			t.Errorf("node JSON has no %q", k)
		}
	}
	n, err := e.hub.Node(ctx, "feeds/demo")
	if err != nil {
		t.Fatal(err)
	}
	if !e.hub.Authorize(n, token) {
		t.Error("the token shown does not authorise the node")
	}

	// The token is shown only at creation.
	resp = e.admin(http.MethodGet, "/api/nodes/feeds%2Fdemo", nil)
	wantStatus(t, resp, http.StatusOK)
	got := decodeJSON[map[string]any](t, resp)
	if got["name"] != "feeds/demo" {
		t.Errorf("GET node = %v", got)
	}
	if _, ok := got["token"]; ok {
		t.Error("GET shows the token")
	}

	// Errors.
	for _, tc := range []struct {
		name string
		body any
		want int
	}{
		{"exists", map[string]any{"node": "feeds/demo"}, http.StatusConflict},
		{"not JSON", "{node:", http.StatusBadRequest},
		{"empty body", "", http.StatusBadRequest},
		{"array", "[]", http.StatusBadRequest},
		{"two values", `{"node":"a"}{"node":"b"}`, http.StatusBadRequest},
		{"unknown field", `{"node":"a","acces_model":"open"}`, http.StatusBadRequest},
		{"missing name", map[string]any{"source": "http://example.org/"}, http.StatusBadRequest},
		{"non-printable name", map[string]any{"node": "a\u0007b"}, http.StatusBadRequest},
		{"name too long", map[string]any{"node": strings.Repeat("n", 256)}, http.StatusBadRequest},
		{"reserved name", map[string]any{"node": "pingd#subscribe", "source": "http://127.0.0.1:9/feed.xml"}, http.StatusBadRequest},
		{"not http", map[string]any{"node": "a", "source": "ftp://example.org/feed"}, http.StatusBadRequest},
		{"relative URL", map[string]any{"node": "a", "source": "/feed.xml"}, http.StatusBadRequest},
		{"bad access model", map[string]any{"node": "a", "access_model": "presence"}, http.StatusBadRequest},
		{"bad max items", map[string]any{"node": "a", "max_items": -1}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.admin(http.MethodPost, "/api/nodes", tc.body)
			wantStatus(t, resp, tc.want)
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if msg := decodeJSON[map[string]string](t, resp)["error"]; msg == "" {
				t.Error("no error message")
			}
		})
	}
	if _, err := e.hub.Node(ctx, "a"); err == nil {
		t.Error("a refused request created node a")
	}
	// The component's command nodes are pingd#…: the error says why.
	resp = e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": "pingd#nodes"})
	wantStatus(t, resp, http.StatusBadRequest)
	if msg := decodeJSON[map[string]string](t, resp)["error"]; !strings.Contains(msg, `"pingd#"`) || !strings.Contains(msg, "reserved") {
		t.Errorf("a reserved node name refused with %q, want the reserved prefix named", msg)
	}

	// A node without a source, with every optional setting.
	resp = e.admin(http.MethodPost, "/api/nodes", map[string]any{
		"node": "plain", "max_items": 5, "deliver_payloads": false, "notification_type": "normal",
	})
	wantStatus(t, resp, http.StatusCreated)
	plain := decodeJSON[map[string]any](t, resp)
	if plain["source"] != "" || plain["access_model"] != "open" || plain["max_items"] != float64(5) ||
		plain["deliver_payloads"] != false || plain["notification_type"] != "normal" {
		t.Errorf("plain node = %v", plain)
	}

	// List.
	resp = e.admin(http.MethodGet, "/api/nodes", nil)
	wantStatus(t, resp, http.StatusOK)
	list := decodeJSON[struct{ Nodes []nodeJSON }](t, resp)
	if len(list.Nodes) != 2 || list.Nodes[0].Name != "feeds/demo" || list.Nodes[1].Name != "plain" {
		t.Errorf("list = %+v", list)
	}

	// New token: the old one stops working.
	resp = e.admin(http.MethodPost, "/api/nodes/feeds%2Fdemo/token", nil)
	wantStatus(t, resp, http.StatusOK)
	newToken := decodeJSON[map[string]string](t, resp)["token"]
	n, _ = e.hub.Node(ctx, "feeds/demo")
	if newToken == "" || newToken == token || !e.hub.Authorize(n, newToken) || e.hub.Authorize(n, token) {
		t.Errorf("token rotation: new %q old %q", newToken, token)
	}
	wantStatus(t, e.admin(http.MethodPost, "/api/nodes/nope/token", nil), http.StatusNotFound)

	// Unknown nodes.
	wantStatus(t, e.admin(http.MethodGet, "/api/nodes/nope", nil), http.StatusNotFound)
	wantStatus(t, e.admin(http.MethodGet, "/api/nodes/feeds/demo", nil), http.StatusNotFound) // "/" is not "%2F"
	wantStatus(t, e.admin(http.MethodDelete, "/api/nodes/nope", nil), http.StatusNotFound)

	// Delete.
	wantStatus(t, e.admin(http.MethodDelete, "/api/nodes/feeds%2Fdemo", nil), http.StatusNoContent)
	wantStatus(t, e.admin(http.MethodGet, "/api/nodes/feeds%2Fdemo", nil), http.StatusNotFound)
	wantStatus(t, e.admin(http.MethodDelete, "/api/nodes/feeds%2Fdemo", nil), http.StatusNotFound)

	// Wrong method.
	resp = e.admin(http.MethodPatch, "/api/nodes", nil)
	wantStatus(t, resp, http.StatusMethodNotAllowed)
	if allow := resp.Header.Get("Allow"); allow != "GET, HEAD, POST" {
		t.Errorf("Allow = %q", allow)
	}
	resp = e.admin(http.MethodPost, "/api/nodes/plain", nil)
	wantStatus(t, resp, http.StatusMethodNotAllowed)
	if allow := resp.Header.Get("Allow"); allow != "DELETE, GET, HEAD, PATCH" {
		t.Errorf("Allow = %q", allow)
	}
}

func TestAdminEncodedNodeNames(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{"feeds/demo", "a b?c#d%e", "..", ".", "ünïcødé/☃", "x+y&z=1"} {
		t.Run(name, func(t *testing.T) {
			wantStatus(t, e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": name}), http.StatusCreated)
			path := "/api/nodes/" + url.PathEscape(name)
			resp := e.admin(http.MethodGet, path, nil)
			wantStatus(t, resp, http.StatusOK)
			got := decodeJSON[nodeJSON](t, resp)
			if got.Name != name {
				t.Errorf("name = %q, want %q", got.Name, name)
			}
			// "." and ".." are escaped further, or clients would resolve them.
			if want := "http://pingd.test:8080/feeds/" + nodeurl.PathSegment(name); got.Links.Descriptor != want {
				t.Errorf("descriptor = %q, want %q", got.Links.Descriptor, want)
			}
			wantStatus(t, e.admin(http.MethodGet, path+"/status", nil), http.StatusOK)
			wantStatus(t, e.admin(http.MethodDelete, path, nil), http.StatusNoContent)
		})
	}
}

func TestAdminWhitelist(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	wantStatus(t, e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": "wl", "access_model": "whitelist"}), http.StatusCreated)

	// A full, unnormalised JID becomes the normalised bare JID.
	resp := e.admin(http.MethodPut, "/api/nodes/wl/whitelist/"+url.PathEscape("Alice@Example.COM/phone"), nil)
	wantStatus(t, resp, http.StatusOK)
	put := decodeJSON[map[string]string](t, resp)
	if put["jid"] != "alice@example.com" || put["affiliation"] != "member" || put["node"] != "wl" {
		t.Errorf("PUT answer = %v", put)
	}
	wantStatus(t, e.admin(http.MethodPut, "/api/nodes/wl/whitelist/bob@example.com", nil), http.StatusOK)

	resp = e.admin(http.MethodGet, "/api/nodes/wl/whitelist", nil)
	wantStatus(t, resp, http.StatusOK)
	wl := decodeJSON[struct {
		Node      string
		Whitelist []whitelistEntry
	}](t, resp)
	if wl.Node != "wl" || len(wl.Whitelist) != 2 || wl.Whitelist[0] != (whitelistEntry{"alice@example.com", hub.AffMember}) ||
		wl.Whitelist[1] != (whitelistEntry{"bob@example.com", hub.AffMember}) {
		t.Errorf("whitelist = %+v", wl)
	}

	for _, bad := range []string{"@example.com", "alice@", "a@b@c", url.PathEscape("alice@exa mple.com")} {
		wantStatus(t, e.admin(http.MethodPut, "/api/nodes/wl/whitelist/"+bad, nil), http.StatusBadRequest)
	}
	wantStatus(t, e.admin(http.MethodPut, "/api/nodes/nope/whitelist/bob@example.com", nil), http.StatusNotFound)
	wantStatus(t, e.admin(http.MethodGet, "/api/nodes/nope/whitelist", nil), http.StatusNotFound)

	// Removing a member removes its subscriptions.
	if _, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: "wl", Kind: hub.KindXMPP,
		Address: "alice@example.com/phone", BareJID: "alice@example.com"}); err != nil {
		t.Fatal(err)
	}
	n, _ := e.hub.Node(ctx, "wl")
	wantStatus(t, e.admin(http.MethodDelete, "/api/nodes/wl/whitelist/"+url.PathEscape("ALICE@example.com"), nil), http.StatusNoContent)
	subs, err := e.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != 0 {
		t.Errorf("subscriptions left after removal: %+v", subs)
	}
	if aff, _ := e.hub.AffiliationOf(ctx, n, "alice@example.com"); aff != hub.AffNone {
		t.Errorf("affiliation after removal = %q", aff)
	}
	wantStatus(t, e.admin(http.MethodDelete, "/api/nodes/wl/whitelist/@", nil), http.StatusBadRequest)
	wantStatus(t, e.admin(http.MethodDelete, "/api/nodes/nope/whitelist/bob@example.com", nil), http.StatusNotFound)
}

// TestAdminSubscribersShowPendingChange: a request waiting for
// verification shows beside the subscription it would change, without
// its secret.
func TestAdminSubscribersShowPendingChange(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.createNode("n", hub.AccessOpen)
	sub, _, err := e.hub.RequestSubscription(ctx, hub.Subscription{NodeName: "n", Kind: hub.KindWebhook,
		Address: "http://127.0.0.1:9/hook", Options: hub.Options{Method: "POST", Secret: "victim-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := e.store.ApplySubscriptionChange(ctx, sub.ID, sub.Change.ID, time.Time{}); err != nil || !ok {
		t.Fatalf("verify: %v %v", ok, err)
	}
	if _, _, err := e.hub.RequestSubscription(ctx, hub.Subscription{NodeName: "n", Kind: hub.KindWebhook,
		Address: "http://127.0.0.1:9/hook", Options: hub.Options{Method: "NOTIFY", Secret: "stranger-secret"}}); err != nil {
		t.Fatal(err)
	}
	resp := e.admin(http.MethodGet, "/api/nodes/n/subscribers", nil)
	wantStatus(t, resp, http.StatusOK)
	body := readBody(t, resp)
	if strings.Contains(string(body), "secret\":\"") || strings.Contains(string(body), "stranger-secret") {
		t.Fatalf("subscribers answer shows a secret: %s", body)
	}
	var subs struct{ Subscribers []subscriberJSON }
	if err := jsonUnmarshal(body, &subs); err != nil {
		t.Fatal(err)
	}
	if len(subs.Subscribers) != 1 {
		t.Fatalf("subscribers = %s", body)
	}
	w := subs.Subscribers[0]
	if w.State != hub.SubActive || w.Method != "POST" || w.PendingChange == nil || w.PendingChange.Mode != hub.ChangeSubscribe ||
		w.PendingChange.Method != "NOTIFY" || !w.PendingChange.HasSecret || w.PendingChange.Requested.IsZero() {
		t.Fatalf("subscriber = %+v (change %+v)", w, w.PendingChange)
	}
}

func TestAdminSubscribersAndStatus(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	wantStatus(t, e.admin(http.MethodPost, "/api/nodes", map[string]any{
		"node": "n", "source": "http://127.0.0.1:1/feed.xml",
	}), http.StatusCreated)
	if _, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: "n", Kind: hub.KindXMPP,
		Address: "carol@example.com/laptop", BareJID: "carol@example.com"}); err != nil {
		t.Fatal(err)
	}
	const secret = "webhook-signing-secret"
	expires := e.clock.Now().Add(24 * time.Hour)
	if _, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: "n", Kind: hub.KindWebhook,
		Address: "http://127.0.0.1:9/hook", State: hub.SubPending, ExpiresAt: expires,
		Options: hub.Options{Method: "POST", Diff: "none", Secret: secret, Verify: map[string]string{"hub.verify_token": "vtok"}}}); err != nil {
		t.Fatal(err)
	}

	resp := e.admin(http.MethodGet, "/api/nodes/n/subscribers", nil)
	wantStatus(t, resp, http.StatusOK)
	body := readBody(t, resp)
	if strings.Contains(string(body), secret) || strings.Contains(string(body), "vtok") {
		t.Fatalf("subscribers answer shows a secret: %s", body)
	}
	var subs struct {
		Node        string
		Subscribers []subscriberJSON
	}
	if err := jsonUnmarshal(body, &subs); err != nil {
		t.Fatal(err)
	}
	if subs.Node != "n" || len(subs.Subscribers) != 2 {
		t.Fatalf("subscribers = %s", body)
	}
	x, w := subs.Subscribers[0], subs.Subscribers[1]
	if x.Kind != hub.KindXMPP || x.Address != "carol@example.com/laptop" || x.State != hub.SubActive || x.SubID == "" || x.Created.IsZero() {
		t.Errorf("xmpp subscriber = %+v", x)
	}
	if w.Kind != hub.KindWebhook || w.Address != "http://127.0.0.1:9/hook" || w.State != hub.SubPending ||
		!w.Expires.Equal(expires) || w.Method != "POST" || w.Diff != "none" || !w.HasSecret {
		t.Errorf("webhook subscriber = %+v", w)
	}
	wantStatus(t, e.admin(http.MethodGet, "/api/nodes/nope/subscribers", nil), http.StatusNotFound)

	resp = e.admin(http.MethodGet, "/api/nodes/n/status", nil)
	wantStatus(t, resp, http.StatusOK)
	st := decodeJSON[statusJSON](t, resp)
	if st.Node.Name != "n" || st.Source == nil || st.Source.URL != "http://127.0.0.1:1/feed.xml" ||
		st.Source.Baselined || st.Source.NextFetch.IsZero() {
		t.Errorf("status = %+v source %+v", st, st.Source)
	}
	wantCounts := map[hub.Kind]int{hub.KindXMPP: 1, hub.KindWebhook: 1, hub.KindWebSub: 0, hub.KindRSSCloud: 0, hub.KindCNWS: 0}
	for k, v := range wantCounts {
		if c, ok := st.Subscribers[k]; !ok || c != v {
			t.Errorf("subscribers[%s] = %d (present %v), want %d", k, c, ok, v)
		}
	}

	// The fetch state after a failed fetch is shown.
	n, _ := e.hub.Node(ctx, "n")
	src, _ := e.hub.Source(ctx, n.SourceID)
	state := src.SourceState
	state.LastFetchAt = e.clock.Now()
	state.LastError = "connection refused"
	state.ConsecutiveErrors = 2
	state.NextFetchAt = e.clock.Now().Add(time.Minute)
	state.NextFetchReason = "backoff after errors"
	if _, err := e.store.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: state}); err != nil {
		t.Fatal(err)
	}
	resp = e.admin(http.MethodGet, "/api/nodes/n/status", nil)
	wantStatus(t, resp, http.StatusOK)
	st = decodeJSON[statusJSON](t, resp)
	if st.Source.LastError != "connection refused" || st.Source.ConsecutiveErrors != 2 ||
		st.Source.NextFetchReason != "backoff after errors" || st.Source.LastFetch.IsZero() {
		t.Errorf("source status = %+v", st.Source)
	}
	wantStatus(t, e.admin(http.MethodGet, "/api/nodes/nope/status", nil), http.StatusNotFound)

	// A node without a source has a null source.
	wantStatus(t, e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": "bare"}), http.StatusCreated)
	resp = e.admin(http.MethodGet, "/api/nodes/bare/status", nil)
	wantStatus(t, resp, http.StatusOK)
	if b := readBody(t, resp); !strings.Contains(string(b), `"source": null`) {
		t.Errorf("status of a node without source: %s", b)
	}
}

func TestAdminRateLimit(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.AdminRate = 0.001; c.AdminBurst = 3 })
	for range 2 {
		wantStatus(t, e.admin(http.MethodGet, "/api/nodes", nil), http.StatusOK)
	}
	// Unauthorised requests take from the same bucket.
	wantStatus(t, e.do(http.MethodGet, "/api/nodes", "wrong", nil), http.StatusUnauthorized)
	resp := e.admin(http.MethodGet, "/api/nodes", nil)
	wantStatus(t, resp, http.StatusTooManyRequests)
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || secs < 1 {
		t.Errorf("Retry-After = %q", resp.Header.Get("Retry-After"))
	}
	// Health checks are not limited.
	wantStatus(t, e.do(http.MethodGet, "/healthz", "", nil), http.StatusOK)
}

func TestAdminBodyLimit(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBodyBytes = 1024 })
	big := `{"node":"big","title":"` + strings.Repeat("x", 2048) + `"}`
	resp := e.admin(http.MethodPost, "/api/nodes", big)
	wantStatus(t, resp, http.StatusRequestEntityTooLarge)
	if msg := decodeJSON[map[string]string](t, resp)["error"]; !strings.Contains(msg, "1024") {
		t.Errorf("413 message = %q", msg)
	}
	// Without a Content-Length the cap applies while reading.
	resp = e.do(http.MethodPost, "/api/nodes", testAdminToken, &unsizedReader{r: strings.NewReader(big)})
	wantStatus(t, resp, http.StatusRequestEntityTooLarge)
	if _, err := e.hub.Node(context.Background(), "big"); err == nil {
		t.Error("an oversized request created a node")
	}
}

// TestJSONSurrogateEscapes: an escaped lone surrogate, which encoding/json
// would turn into U+FFFD, is refused with 400 and creates nothing; pairs
// and other escapes go through.
func TestJSONSurrogateEscapes(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"node":"bad\ud800"}`, false},
		{`{"node":"bad\udc00x"}`, false},
		{`{"node":"bad\ud800\u0041"}`, false},
		{`{"node":"bad\uD83D"}`, false},
		{`{"node":"pair\ud83d\ude00"}`, true},
		{`{"node":"slash\\ud800"}`, true}, // an escaped backslash, then text
		{`{"node":"e\u00e9\"q"}`, true},
	} {
		resp := e.do(http.MethodPost, "/api/nodes", testAdminToken, strings.NewReader(tc.body))
		if tc.ok {
			wantStatus(t, resp, http.StatusCreated)
			continue
		}
		wantStatus(t, resp, http.StatusBadRequest)
		if body := decodeJSON[map[string]string](t, resp); !strings.Contains(body["error"], "surrogate") {
			t.Errorf("%s: error %q", tc.body, body["error"])
		}
	}
	nodes, err := e.hub.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if strings.ContainsRune(n.Name, utf8.RuneError) {
			t.Errorf("node %q was created with a replacement character", n.Name)
		}
	}
}

// FuzzCheckSurrogateEscapes: what checkSurrogateEscapes refuses is what
// encoding/json would repair into U+FFFD, and what it lets through decodes
// without one unless the body asked for it.
func FuzzCheckSurrogateEscapes(f *testing.F) {
	for _, s := range []string{`"a\ud800"`, `"\ud83d\ude00"`, `"\\ud800"`, `"\udc00\ud800"`, `"\u00e9"`, `"\"\\\/\b"`, `"\ud800\\"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if !utf8.ValidString(body) {
			t.Skip()
		}
		var s string
		if json.Unmarshal([]byte(body), &s) != nil {
			return
		}
		err := checkSurrogateEscapes([]byte(body))
		repaired := strings.ContainsRune(s, utf8.RuneError)
		if err != nil && !repaired {
			t.Fatalf("%q refused (%v), but decodes to %q without a replacement", body, err, s)
		}
		asked := strings.ContainsRune(body, utf8.RuneError) || strings.Contains(strings.ToLower(body), "fffd")
		if err == nil && repaired && !asked {
			t.Fatalf("%q let through, but decodes to %q", body, s)
		}
	})
}

// TestListNodesStreamed: the node listing, written node by node, is byte
// for byte what encoding the whole answer at once gives, for no node, one
// and several.
func TestListNodesStreamed(t *testing.T) {
	e := newEnv(t)
	api := e.api
	for _, names := range [][]string{nil, {"one"}, {"two", "three/with \"quotes\" & <tags>"}} {
		for _, name := range names {
			wantStatus(t, e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": name, "title": "T " + name}), http.StatusCreated)
		}
		nodes, err := e.hub.Nodes(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		all := make([]nodeJSON, 0, len(nodes))
		for i := range nodes {
			all = append(all, api.nodeJSON(&nodes[i]))
		}
		want, err := json.MarshalIndent(map[string]any{"nodes": all}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		resp := e.admin(http.MethodGet, "/api/nodes", nil)
		wantStatus(t, resp, http.StatusOK)
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want)+"\n" {
			t.Errorf("%d nodes: listing\n%s\nwant\n%s", len(nodes), got, want)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
	}
}
