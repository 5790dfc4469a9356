package httpapi

import (
	"cmp"
	"net/http"
	"time"

	"github.com/pingd/pingd/hub"
)

// subscriberJSON is a subscription as the admin API shows it: everything
// but secrets (the signing secret and pending verification tokens).
type subscriberJSON struct {
	ID        int64        `json:"id"`
	Kind      hub.Kind     `json:"kind"`
	Address   string       `json:"address"`
	BareJID   string       `json:"bare_jid,omitempty"`
	SubID     string       `json:"subid,omitempty"`
	State     hub.SubState `json:"state"`
	Created   time.Time    `json:"created"`
	Updated   time.Time    `json:"updated"`
	Expires   time.Time    `json:"expires,omitzero"`
	Method    string       `json:"method,omitempty"`
	Diff      string       `json:"diff,omitempty"`
	Topic     string       `json:"topic,omitempty"`
	Lease     int          `json:"lease_seconds,omitempty"`
	SigAlgo   string       `json:"sig_algo,omitempty"`
	HasSecret bool         `json:"has_secret,omitempty"`
	Protocol  string       `json:"protocol,omitempty"`
	Procedure string       `json:"procedure,omitempty"`
	// XMPP: the notifications' format (pubsub or message), message type
	// and readable body. For XMPP the delivery's consecutive_errors,
	// first_failure and last_error count and explain bounced notifications.
	Format      string       `json:"format,omitempty"`
	MessageType string       `json:"message_type,omitempty"`
	IncludeBody bool         `json:"include_body,omitempty"`
	Delivery    deliveryJSON `json:"delivery"`
	// PendingChange is a request about the subscription waiting for its
	// subscriber to verify it; the subscription is served as it is until
	// then.
	PendingChange *changeJSON `json:"pending_change,omitempty"`
}

// changeJSON is a pending change as the admin API shows it: the settings
// asked for, but not the secret.
type changeJSON struct {
	Mode      string    `json:"mode"`
	Requested time.Time `json:"requested"`
	Method    string    `json:"method,omitempty"`
	Diff      string    `json:"diff,omitempty"`
	Lease     int       `json:"lease_seconds,omitempty"`
	HasSecret bool      `json:"has_secret,omitempty"`
	Protocol  string    `json:"protocol,omitempty"`
	Procedure string    `json:"procedure,omitempty"`
}

// changeFrom shows a subscription's pending change; nil when none waits.
func changeFrom(c hub.SubChange) *changeJSON {
	if !c.Pending() {
		return nil
	}
	return &changeJSON{Mode: c.Mode, Requested: c.RequestedAt, Method: c.Options.Method, Diff: c.Options.Diff,
		Lease: c.Options.LeaseSeconds, HasSecret: c.Options.Secret != "", Protocol: c.Options.Protocol,
		Procedure: c.Options.Procedure}
}

type deliveryJSON struct {
	Cursor            int64     `json:"cursor"`
	Attempts          int       `json:"attempts"`
	ConsecutiveErrors int       `json:"consecutive_errors"`
	FirstFailure      time.Time `json:"first_failure,omitzero"`
	NextAttempt       time.Time `json:"next_attempt,omitzero"`
	LastError         string    `json:"last_error,omitempty"`
	LastDelivered     time.Time `json:"last_delivered,omitzero"`
	LastStatus        int       `json:"last_status,omitempty"`
}

func subscriberFrom(s *hub.Subscription) subscriberJSON {
	out := subscriberJSON{
		ID:        s.ID,
		Kind:      s.Kind,
		Address:   s.Address,
		BareJID:   s.BareJID,
		SubID:     s.SubID,
		State:     s.State,
		Created:   s.CreatedAt,
		Updated:   s.UpdatedAt,
		Expires:   s.ExpiresAt,
		Method:    s.Options.Method,
		Diff:      s.Options.Diff,
		Topic:     s.Options.Topic,
		Lease:     s.Options.LeaseSeconds,
		SigAlgo:   s.Options.SigAlgo,
		HasSecret: s.Options.Secret != "",
		Protocol:  s.Options.Protocol,
		Procedure: s.Options.Procedure,
		Delivery: deliveryJSON{
			Cursor:            s.Cursor,
			Attempts:          s.Attempts,
			ConsecutiveErrors: s.ConsecutiveErrors,
			FirstFailure:      s.FirstFailureAt,
			NextAttempt:       s.NextAttemptAt,
			LastError:         s.LastError,
			LastDelivered:     s.LastDeliveredAt,
			LastStatus:        s.LastStatus,
		},
		PendingChange: changeFrom(s.Change),
	}
	if s.Kind == hub.KindXMPP {
		out.Format = cmp.Or(s.Options.Format, hub.FormatPubsub)
		out.MessageType, out.IncludeBody = s.Options.MessageType, s.Options.IncludeBody
	}
	return out
}

func (a *Admin) getSubscribers(w http.ResponseWriter, r *http.Request) {
	n, ok := a.node(w, r)
	if !ok {
		return
	}
	subs, err := a.hub.Subscriptions(r.Context(), hub.SubscriptionFilter{NodeID: n.ID})
	if err != nil {
		a.writeHubError(w, r, err, "list subscriptions")
		return
	}
	out := make([]subscriberJSON, 0, len(subs))
	for i := range subs {
		out = append(out, subscriberFrom(&subs[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"node": n.Name, "subscribers": out})
}

// sourceJSON is a source's fetch state in the node status.
type sourceJSON struct {
	URL               string    `json:"url"`
	OriginalURL       string    `json:"original_url"`
	MovedFrom         string    `json:"moved_from,omitempty"`
	MovedAt           time.Time `json:"moved_at,omitzero"`
	Gone              bool      `json:"gone"`
	Baselined         bool      `json:"baselined"`
	IsFeed            bool      `json:"is_feed"`
	Title             string    `json:"title,omitempty"`
	SiteURL           string    `json:"site_url,omitempty"`
	ContentType       string    `json:"content_type,omitempty"`
	LastFetch         time.Time `json:"last_fetch,omitzero"`
	LastStatus        int       `json:"last_status,omitempty"`
	LastBytes         int64     `json:"last_bytes"`
	LastNewItems      int       `json:"last_new_items"`
	LastError         string    `json:"last_error,omitempty"`
	ConsecutiveErrors int       `json:"consecutive_errors"`
	LastChange        time.Time `json:"last_change,omitzero"`
	LastPing          time.Time `json:"last_ping,omitzero"`
	NextFetch         time.Time `json:"next_fetch,omitzero"`
	NextFetchReason   string    `json:"next_fetch_reason,omitempty"`
}

func sourceFrom(s *hub.Source) *sourceJSON {
	return &sourceJSON{
		URL:               s.URL,
		OriginalURL:       s.OriginalURL,
		MovedFrom:         s.MovedFrom,
		MovedAt:           s.MovedAt,
		Gone:              s.Gone,
		Baselined:         s.Baselined,
		IsFeed:            s.IsFeed,
		Title:             s.Title,
		SiteURL:           s.SiteURL,
		ContentType:       s.ContentType,
		LastFetch:         s.LastFetchAt,
		LastStatus:        s.LastStatus,
		LastBytes:         s.LastBytes,
		LastNewItems:      s.LastNewItems,
		LastError:         s.LastError,
		ConsecutiveErrors: s.ConsecutiveErrors,
		LastChange:        s.LastChangeAt,
		LastPing:          s.LastPingAt,
		NextFetch:         s.NextFetchAt,
		NextFetchReason:   s.NextFetchReason,
	}
}

type statusJSON struct {
	Node        nodeJSON         `json:"node"`
	Source      *sourceJSON      `json:"source"`
	Subscribers map[hub.Kind]int `json:"subscribers"`
	LastSeq     int64            `json:"last_seq"`
	XMPPSeq     int64            `json:"xmpp_seq"`
	// Upstream lists the push subscriptions pingd holds at the source's
	// own WebSub hub or rssCloud cloud (secrets left out).
	Upstream []upstreamJSON `json:"upstream"`
}

func (a *Admin) getStatus(w http.ResponseWriter, r *http.Request) {
	n, ok := a.node(w, r)
	if !ok {
		return
	}
	st := statusJSON{
		Node:        a.nodeJSON(n),
		Subscribers: make(map[hub.Kind]int, len(hub.Kinds)),
		LastSeq:     n.LastSeq,
		XMPPSeq:     n.XMPPSeq,
	}
	for _, k := range hub.Kinds {
		st.Subscribers[k] = 0
	}
	subs, err := a.hub.Subscriptions(r.Context(), hub.SubscriptionFilter{NodeID: n.ID})
	if err != nil {
		a.writeHubError(w, r, err, "count subscriptions")
		return
	}
	for _, s := range subs {
		st.Subscribers[s.Kind]++
	}
	if n.SourceID != 0 {
		src, err := a.hub.Source(r.Context(), n.SourceID)
		if err != nil {
			a.writeHubError(w, r, err, "load source")
			return
		}
		st.Source = sourceFrom(src)
		if a.cfg.Upstreams != nil {
			ups, err := a.cfg.Upstreams.UpstreamsOfSource(r.Context(), n.SourceID)
			if err != nil {
				a.writeHubError(w, r, err, "load upstream subscriptions")
				return
			}
			for _, u := range ups {
				st.Upstream = append(st.Upstream, upstreamFrom(u))
			}
		}
	}
	if st.Upstream == nil {
		st.Upstream = []upstreamJSON{}
	}
	writeJSON(w, http.StatusOK, st)
}

// upstreamJSON is one upstream push subscription in a node's status.
type upstreamJSON struct {
	Kind      string     `json:"kind"`
	Endpoint  string     `json:"endpoint"`
	Topic     string     `json:"topic"`
	State     string     `json:"state"`
	Expires   *time.Time `json:"expires,omitempty"`
	NextRenew *time.Time `json:"next_renew,omitempty"`
	LastPush  *time.Time `json:"last_push,omitempty"`
	LastError string     `json:"last_error,omitempty"`
}

func upstreamFrom(u hub.Upstream) upstreamJSON {
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	return upstreamJSON{Kind: u.Kind, Endpoint: u.Endpoint, Topic: u.Topic, State: u.State,
		Expires: opt(u.ExpiresAt), NextRenew: opt(u.NextRenewAt), LastPush: opt(u.LastPushAt), LastError: u.LastError}
}

// getRelay is GET /api/relay: each configured relay target's counts, last
// success and last error.
func (a *Admin) getRelay(w http.ResponseWriter, r *http.Request) {
	out := []hub.RelayTargetStatus{}
	byTarget := map[string]hub.RelayTargetStatus{}
	if a.cfg.Relays != nil {
		st, err := a.cfg.Relays.RelayStatus(r.Context())
		if err != nil {
			a.writeHubError(w, r, err, "relay status")
			return
		}
		for _, s := range st {
			byTarget[s.Target] = s
		}
	}
	for _, t := range a.cfg.RelayTargets {
		s, ok := byTarget[t]
		if !ok {
			s = hub.RelayTargetStatus{Target: t}
		}
		out = append(out, s)
	}
	writeJSON(w, http.StatusOK, map[string]any{"targets": out})
}
