package httpapi

import (
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"
)

func (a *API) adminRoutes(r *mux.Router) {
	const node = "/api/nodes/{node}"
	r.Handle("/api/nodes", a.admin(a.listNodes)).Methods(http.MethodGet, http.MethodHead)
	r.Handle("/api/nodes", a.admin(a.createNode)).Methods(http.MethodPost)
	r.Handle(node, a.admin(a.getNode)).Methods(http.MethodGet, http.MethodHead)
	r.Handle(node, a.admin(a.deleteNode)).Methods(http.MethodDelete)
	r.Handle(node, a.admin(a.patchNode)).Methods(http.MethodPatch)
	r.Handle("/api/relay", a.admin(a.getRelay)).Methods(http.MethodGet, http.MethodHead)
	r.Handle(node+"/token", a.admin(a.rotateToken)).Methods(http.MethodPost)
	r.Handle(node+"/whitelist", a.admin(a.getWhitelist)).Methods(http.MethodGet, http.MethodHead)
	r.Handle(node+"/whitelist/{jid}", a.admin(a.putWhitelist)).Methods(http.MethodPut)
	r.Handle(node+"/whitelist/{jid}", a.admin(a.deleteWhitelist)).Methods(http.MethodDelete)
	r.Handle(node+"/subscribers", a.admin(a.getSubscribers)).Methods(http.MethodGet, http.MethodHead)
	r.Handle(node+"/status", a.admin(a.getStatus)).Methods(http.MethodGet, http.MethodHead)
	r.Handle("/api/status", a.admin(a.getAPIStatus)).Methods(http.MethodGet, http.MethodHead)
}

// admin wraps an admin handler: the per-client rate limit first (so
// guessing tokens is slow too), then the bearer token.
func (a *API) admin(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ok, wait := a.adminLimit.Allow(clientKey(r), time.Now()); !ok {
			setRetryAfter(w, wait)
			writeJSONError(w, http.StatusTooManyRequests, "too many requests; retry later")
			return
		}
		// Reads also take the token as the password of HTTP Basic, as the
		// status page's admin view does, so a browser that logged in there
		// reads the API too. Changes take only the Bearer header, which a
		// browser never sends by itself (no cross-site requests ride on a
		// remembered Basic login).
		read := r.Method == http.MethodGet || r.Method == http.MethodHead
		token, ok := bearerToken(r)
		if !ok && read {
			_, token, ok = r.BasicAuth()
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pingd"`)
			if read {
				w.Header().Add("WWW-Authenticate", `Basic realm="pingd"`)
			}
			writeJSONError(w, http.StatusUnauthorized, "missing bearer token")
			return
		}
		if !a.hub.IsAdminToken(token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pingd", error="invalid_token"`)
			if read {
				w.Header().Add("WWW-Authenticate", `Basic realm="pingd"`)
			}
			writeJSONError(w, http.StatusUnauthorized, "wrong bearer token")
			return
		}
		h(w, r)
	})
}

// bearerToken returns the token of an "Authorization: Bearer" header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
