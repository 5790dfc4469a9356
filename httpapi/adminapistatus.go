package httpapi

import (
	"context"
	"net/http"
	"time"
)

// apiStatus is GET /api/status: the status page's figures as JSON, for
// scripts and monitoring. It shares the page's cached reading of the
// store (statusCache), so polling it costs what viewing the page does.
type apiStatus struct {
	Version   string          `json:"version"`
	Started   string          `json:"started"`
	Uptime    string          `json:"uptime"`
	Backend   string          `json:"backend"`
	Component apiComponent    `json:"component"`
	Healthy   bool            `json:"healthy"`
	Problems  []apiProblem    `json:"problems"`
	Error     string          `json:"error,omitempty"`
	Nodes     *int            `json:"nodes,omitempty"`
	Subs      map[string]int  `json:"subscribers,omitempty"`
	Sources   *apiSources     `json:"sources,omitempty"`
	Delivery  *apiDeliveries  `json:"deliveries,omitempty"`
	XMPP      *apiXMPPBacklog `json:"xmpp,omitempty"`
	Pings     *apiPings       `json:"pings,omitempty"`
	Fetch     fetchLimitsView `json:"fetch"`
}

type apiComponent struct {
	JID       string `json:"jid"`
	Connected bool   `json:"connected"`
}

type apiProblem struct {
	Severity string `json:"severity"` // "bad" or "warning"
	Text     string `json:"text"`
}

type apiSources struct {
	Followed int `json:"followed"`
	Failing  int `json:"failing"`
	Gone     int `json:"gone"`
	Moved    int `json:"moved"`
	Late     int `json:"late"`
	Due      int `json:"due"`
	Running  int `json:"running"`
}

type apiDeliveries struct {
	Subscriptions int   `json:"subscriptions"`
	Pending       int   `json:"pending"`
	Suspended     int   `json:"suspended"`
	Failing       int   `json:"failing"`
	Behind        int   `json:"behind"`
	EventsBehind  int64 `json:"events_behind"`
}

type apiXMPPBacklog struct {
	NodesBehind  int   `json:"nodes_behind"`
	EventsBehind int64 `json:"events_behind"`
	Bouncing     int   `json:"bouncing"`
}

type apiPings struct {
	LastHour int   `json:"last_hour"`
	Total    int64 `json:"total"`
}

func (a *Pages) getAPIStatus(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), statusTimeout)
	defer cancel()
	v := a.statusView(ctx, true)
	out := apiStatus{
		Version:   v.Version,
		Started:   processStart.UTC().Format(time.RFC3339),
		Uptime:    v.Uptime,
		Backend:   v.Backend,
		Component: apiComponent{JID: v.ComponentJID, Connected: v.Connected},
		Problems:  []apiProblem{},
		Error:     v.StoreError,
		Fetch:     v.Fetch,
	}
	if out.Error == "" {
		out.Error = v.ReportError
	}
	out.Healthy = v.StoreError == "" && v.Connected
	for _, p := range v.Problems {
		sev := "warning"
		if p.Bad {
			sev = "bad"
			out.Healthy = false
		}
		out.Problems = append(out.Problems, apiProblem{Severity: sev, Text: p.Text})
	}
	if rep := v.Report; rep != nil {
		out.Nodes = &rep.NodesTotal
		out.Subs = make(map[string]int, len(v.Kinds))
		for i, k := range v.Kinds {
			if i < len(rep.SubscriberCounts) {
				out.Subs[string(k)] = rep.SubscriberCounts[i]
			}
		}
		out.Sources = &apiSources{Followed: rep.SourcesTotal, Failing: rep.SourcesFailing, Gone: rep.SourcesGone,
			Moved: rep.SourcesMoved, Late: rep.SourcesLate, Due: rep.FetchDue, Running: rep.FetchRunning}
		out.Delivery = &apiDeliveries{Subscriptions: rep.QueueSubscriptions, Pending: rep.QueuePending,
			Suspended: rep.QueueSuspended, Failing: rep.QueueFailing, Behind: rep.QueueBehind, EventsBehind: rep.QueueEventsBehind}
		out.XMPP = &apiXMPPBacklog{NodesBehind: rep.NodesBehindXMPP, EventsBehind: rep.EventsBehindXMPP, Bouncing: rep.BouncingTotal}
		out.Pings = &apiPings{LastHour: rep.PingsRecent, Total: rep.PingsTotal}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}
