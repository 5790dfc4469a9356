package httpapi

import (
	"context"
	"net/http"
	"time"
)

// healthCheckTimeout bounds the store check of /healthz, so a hung
// database gives 503 rather than a hung probe.
const healthCheckTimeout = 3 * time.Second

// healthz answers 200 while the store answers.
func (a *Pages) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	ctx, cancel := context.WithTimeout(r.Context(), healthCheckTimeout)
	defer cancel()
	if err := a.store.Check(ctx); err != nil {
		a.log.WarnContext(r.Context(), "health check: store does not answer", "err", err)
		writeText(w, http.StatusServiceUnavailable, "unhealthy: the database does not answer")
		return
	}
	writeText(w, http.StatusOK, "ok")
}

// readyz answers 200 only while the component is connected to the XMPP
// server.
func (a *Pages) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if a.cfg.Ready == nil || !a.cfg.Ready() {
		writeText(w, http.StatusServiceUnavailable, "not ready: not connected to the XMPP server")
		return
	}
	writeText(w, http.StatusOK, "ready")
}
