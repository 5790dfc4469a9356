package httpapi

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/xmppaddr"
)

// whitelistEntry is one JID and its affiliation.
type whitelistEntry struct {
	JID         string          `json:"jid"`
	Affiliation hub.Affiliation `json:"affiliation"`
}

func (a *Admin) getWhitelist(w http.ResponseWriter, r *http.Request) {
	n, ok := a.node(w, r)
	if !ok {
		return
	}
	affs, err := a.hub.Affiliations(r.Context(), n)
	if err != nil {
		a.writeHubError(w, r, err, "list affiliations")
		return
	}
	list := make([]whitelistEntry, 0, len(affs))
	for j, aff := range affs {
		list = append(list, whitelistEntry{JID: j, Affiliation: aff})
	}
	slices.SortFunc(list, func(x, y whitelistEntry) int { return strings.Compare(x.JID, y.JID) })
	writeJSON(w, http.StatusOK, map[string]any{"node": n.Name, "whitelist": list})
}

// bareJID parses the {jid} path variable and reduces it to a normalised
// bare JID, answering 400 itself when it is not a JID.
func bareJID(w http.ResponseWriter, r *http.Request) (string, bool) {
	raw, ok := pathVar(r, "jid")
	if !ok {
		writeJSONError(w, http.StatusBadRequest, "the JID is not validly percent-encoded")
		return "", false
	}
	bare, err := xmppaddr.Bare(raw)
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("invalid JID %q: %v", raw, err))
		return "", false
	}
	return bare, true
}

func (a *Admin) putWhitelist(w http.ResponseWriter, r *http.Request) {
	n, ok := a.node(w, r)
	if !ok {
		return
	}
	bare, ok := bareJID(w, r)
	if !ok {
		return
	}
	if err := a.hub.SetAffiliation(r.Context(), n, bare, hub.AffMember); err != nil {
		a.writeHubError(w, r, err, "add to whitelist")
		return
	}
	a.log.InfoContext(r.Context(), "whitelist: member added", "node", n.Name, "jid", bare)
	writeJSON(w, http.StatusOK, map[string]any{"node": n.Name, "jid": bare, "affiliation": hub.AffMember})
}

func (a *Admin) deleteWhitelist(w http.ResponseWriter, r *http.Request) {
	n, ok := a.node(w, r)
	if !ok {
		return
	}
	bare, ok := bareJID(w, r)
	if !ok {
		return
	}
	if err := a.hub.SetAffiliation(r.Context(), n, bare, hub.AffNone); err != nil {
		a.writeHubError(w, r, err, "remove from whitelist")
		return
	}
	a.log.InfoContext(r.Context(), "whitelist: JID removed", "node", n.Name, "jid", bare)
	w.WriteHeader(http.StatusNoContent)
}
