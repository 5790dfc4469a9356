package httpapi

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/pingd/pingd/hub"
)

// statusPageView is the template's data. Everything in it is plain text;
// html/template escapes it.
type statusPageView struct {
	Admin        bool
	CSS          template.CSS
	Now          timeView
	Version      string
	Uptime       string
	Started      timeView
	ComponentJID string
	Connected    bool
	Backend      string
	// StoreError is set when the database does not answer, ReportError
	// when it answered the check but not the report.
	StoreError  string
	ReportError string
	Problems    []problemView
	Kinds       []hub.Kind
	Limit       int
	// LateAfter is statusLateAfter as the page writes it.
	LateAfter string
	// Report is nil when the report could not be read.
	Report *reportView
	// Fetch is the fetch loop's limits and this process's load.
	Fetch fetchLimitsView
}

// fetchLimitsView is what the fetch loop works within, and what this
// process holds now: fetches running, claimed sources waiting for their
// host, hosts left alone after a 429 or 503.
type fetchLimitsView struct {
	Workers        int    `json:"workers"`
	PerHost        int    `json:"per_host"`
	Spacing        string `json:"spacing"`
	Interval       string `json:"interval,omitempty"`
	Running        int    `json:"running"`
	WaitingForHost int    `json:"waiting_for_host"`
	HostsPaused    int    `json:"hosts_paused"`
}

type problemView struct {
	Bad  bool // bad rather than worth a look
	Text string
}

type reportView struct {
	NodesTotal, NodesMore int
	NodesBehindXMPP       int
	EventsBehindXMPP      int64
	// SubscriberCounts are the subscriptions by kind in Kinds' order.
	SubscriberCounts []int
	SubscribersTotal int
	Nodes            []nodeView

	SourcesTotal, SourcesMore                              int
	SourcesFailing, SourcesGone, SourcesMoved, SourcesLate int
	Sources                                                []sourceView
	// The fetch loop's load over every process: due and waiting, being
	// fetched, and how long the oldest due one has waited.
	FetchDue, FetchRunning                              int
	FetchOldestDue                                      timeView
	QueueSubscriptions, QueuePending, QueueSuspended    int
	QueueFailing, QueueBehind, QueueProblems, QueueMore int
	QueueEventsBehind                                   int64
	OldestFailure                                       timeView
	Deliveries                                          []deliveryView
	// Bouncing are the XMPP subscriptions whose notifications bounce.
	Bouncing                    []bounceView
	BouncingTotal, BouncingMore int
	PingsRecent, PingsMore      int
	PingsTotal                  int64
	Pings                       []pingView
	Subscribers                 []subscriberView
	SubscribersMore             int
}

type nodeView struct {
	Name, Link, Title string
	Whitelist         bool
	Implicit          bool
	// Source is the source URL, or empty with SourceHidden set for a
	// whitelist node seen by a non-admin.
	Source       string
	SourceHidden bool
	Counts       []int
	Total        int
	XMPPBehind   int64
	Flags        []flagView
}

type sourceView struct {
	URL, MovedFrom, Title string
	Hidden                bool
	Nodes                 int
	LastFetch             timeView
	Status                string
	NextFetch             timeView
	NextFetchReason       string
	Errors                int
	LastError             string
	LastErrorHidden       bool
	LastChange, LastPing  timeView
	Flags                 []flagView
}

type deliveryView struct {
	ID                        int64
	Node, NodeLink            string
	Kind                      hub.Kind
	Address                   string
	State                     hub.SubState
	Behind                    int64
	Errors                    int
	FirstFailure, NextAttempt timeView
	LastDelivered             timeView
	LastStatus                int
	LastError                 string
	Flags                     []flagView
}

// bounceView is an XMPP subscription whose notifications bounce; the
// address and the error only in the admin view.
type bounceView struct {
	ID             int64
	Node, NodeLink string
	Address        string
	Bounces        int
	FirstBounce    timeView
	LastError      string
}

type pingView struct {
	When                     timeView
	Dialect, Name, URL, From string
}

type subscriberView struct {
	Node, NodeLink   string
	Kind             hub.Kind
	Address          string
	State            hub.SubState
	Created, Expires timeView
}

// flagView is a short badge; Bad ones are red, the others amber.
type flagView struct {
	Text string
	Bad  bool
}

// timeView is a time for a <time> element: ISO for its datetime
// attribute, Text relative to the page's now, Title the full UTC time.
type timeView struct {
	ISO, Text, Title string
}

func timeOf(t, now time.Time) timeView {
	if t.IsZero() {
		return timeView{Text: "—"}
	}
	t = t.UTC()
	v := timeView{ISO: t.Format(time.RFC3339), Title: t.Format("2006-01-02 15:04:05 UTC")}
	d := now.Sub(t)
	switch {
	case d > -time.Second && d < time.Second:
		v.Text = "now"
	case d > 0:
		v.Text = compactDuration(d) + " ago"
	default:
		v.Text = "in " + compactDuration(-d)
	}
	return v
}

// compactDuration writes d with its two largest units: "45s", "3m 20s",
// "2h 5m", "3d 4h".
func compactDuration(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	units := []struct {
		size time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}}
	for i, u := range units[:3] {
		if d < u.size {
			continue
		}
		next := units[i+1]
		if rest := (d % u.size) / next.size; rest > 0 {
			return fmt.Sprintf("%d%s %d%s", d/u.size, u.name, rest, next.name)
		}
		return fmt.Sprintf("%d%s", d/u.size, u.name)
	}
	return d.String() // not reached: d >= 1m
}

// fill turns the store's report into what the page shows, leaving out
// what only an admin may see.
func (v *statusPageView) fill(rep *hub.StatusReport, now time.Time) {
	r := &reportView{
		NodesTotal:         rep.NodesTotal,
		NodesMore:          max(rep.NodesTotal-len(rep.Nodes), 0),
		NodesBehindXMPP:    rep.NodesBehindXMPP,
		EventsBehindXMPP:   rep.EventsBehindXMPP,
		SourcesTotal:       rep.SourcesTotal,
		SourcesMore:        max(rep.SourcesTotal-len(rep.Sources), 0),
		SourcesFailing:     rep.SourcesFailing,
		SourcesGone:        rep.SourcesGone,
		SourcesMoved:       rep.SourcesMoved,
		SourcesLate:        rep.SourcesLate,
		FetchDue:           rep.FetchDue,
		FetchRunning:       rep.FetchRunning,
		FetchOldestDue:     timeOf(rep.FetchOldestDue, now),
		QueueSubscriptions: rep.Queue.Subscriptions,
		QueuePending:       rep.Queue.Pending,
		QueueSuspended:     rep.Queue.Suspended,
		QueueFailing:       rep.Queue.Failing,
		QueueBehind:        rep.Queue.Behind,
		QueueEventsBehind:  rep.Queue.EventsBehind,
		QueueProblems:      rep.Queue.Problems,
		QueueMore:          max(rep.Queue.Problems-len(rep.Deliveries), 0),
		OldestFailure:      timeOf(rep.Queue.OldestFailure, now),
		PingsRecent:        rep.PingsRecent,
		PingsMore:          max(rep.PingsRecent-len(rep.Pings), 0),
		PingsTotal:         rep.PingsTotal,
	}
	for _, k := range v.Kinds {
		r.SubscriberCounts = append(r.SubscriberCounts, rep.Subscribers[k])
		r.SubscribersTotal += rep.Subscribers[k]
	}
	for _, n := range rep.Nodes {
		nv := nodeView{
			Name:       n.Name,
			Link:       "/feeds/" + url.PathEscape(n.Name),
			Title:      clip(n.Title),
			Whitelist:  n.AccessModel == hub.AccessWhitelist,
			Implicit:   n.Implicit,
			Source:     redactURL(n.SourceURL),
			XMPPBehind: max(n.LastSeq-n.XMPPSeq, 0),
		}
		if nv.Whitelist && !v.Admin && n.SourceURL != "" {
			nv.Source, nv.SourceHidden = "", true
		}
		for _, k := range v.Kinds {
			nv.Counts = append(nv.Counts, n.Subscribers[k])
			nv.Total += n.Subscribers[k]
		}
		if n.Failing > 0 {
			nv.Flags = append(nv.Flags, flagView{Text: fmt.Sprintf("%d failing", n.Failing), Bad: true})
		}
		if n.Suspended > 0 {
			nv.Flags = append(nv.Flags, flagView{Text: fmt.Sprintf("%d suspended", n.Suspended), Bad: true})
		}
		if n.SourceFailing {
			nv.Flags = append(nv.Flags, flagView{Text: "source failing", Bad: true})
		}
		if n.SourceGone {
			nv.Flags = append(nv.Flags, flagView{Text: "source gone"})
		}
		if n.Behind > 0 {
			nv.Flags = append(nv.Flags, flagView{Text: fmt.Sprintf("%d behind", n.Behind)})
		}
		r.Nodes = append(r.Nodes, nv)
	}
	for _, s := range rep.Sources {
		sv := sourceView{
			URL:             redactURL(s.URL),
			MovedFrom:       redactURL(s.MovedFrom),
			Title:           clip(s.Title),
			Nodes:           s.Nodes,
			LastFetch:       timeOf(s.LastFetchAt, now),
			NextFetch:       timeOf(s.NextFetchAt, now),
			NextFetchReason: clip(s.NextFetchReason),
			Errors:          s.ConsecutiveErrors,
			LastChange:      timeOf(s.LastChangeAt, now),
			LastPing:        timeOf(s.LastPingAt, now),
			Status:          "—",
		}
		if !s.LastPingAt.IsZero() && s.LastPingAt.After(s.LastFetchAt) && !s.NextFetchAt.After(s.LastPingAt) {
			// A ping moved the fetch forward; the stored reason is the
			// schedule's from before it.
			sv.NextFetchReason = "ping received"
		}
		if s.LastStatus != 0 {
			sv.Status = strconv.Itoa(s.LastStatus)
			if text := http.StatusText(s.LastStatus); text != "" {
				sv.Status += " " + text
			}
		} else if s.LastError != "" {
			sv.Status = "no answer"
		}
		if !s.Open && !v.Admin {
			// Followed only by whitelist nodes: the URL may be a private
			// feed's.
			sv.URL, sv.MovedFrom, sv.Title, sv.Hidden = "", "", "", true
		}
		if s.LastError != "" {
			if v.Admin {
				sv.LastError = clip(redactText(s.LastError))
			} else {
				sv.LastErrorHidden = true
			}
		}
		if s.ConsecutiveErrors > 0 {
			sv.Flags = append(sv.Flags, flagView{Text: "failing", Bad: true})
		}
		if s.Gone {
			sv.Flags = append(sv.Flags, flagView{Text: "gone", Bad: true})
		}
		if s.MovedFrom != "" {
			sv.Flags = append(sv.Flags, flagView{Text: "moved"})
		}
		if !s.Baselined && s.ConsecutiveErrors == 0 && !s.Gone {
			sv.Flags = append(sv.Flags, flagView{Text: "not fetched yet"})
		}
		if !s.Gone && !s.NextFetchAt.IsZero() && s.NextFetchAt.Before(now.Add(-statusLateAfter)) {
			sv.Flags = append(sv.Flags, flagView{Text: "late"})
		}
		r.Sources = append(r.Sources, sv)
	}
	for _, d := range rep.Deliveries {
		dv := deliveryView{
			ID:            d.ID,
			Node:          d.NodeName,
			NodeLink:      "/feeds/" + url.PathEscape(d.NodeName),
			Kind:          d.Kind,
			State:         d.State,
			Behind:        max(d.NodeLastSeq-d.Cursor, 0),
			Errors:        d.ConsecutiveErrors,
			FirstFailure:  timeOf(d.FirstFailureAt, now),
			NextAttempt:   timeOf(d.NextAttemptAt, now),
			LastDelivered: timeOf(d.LastDeliveredAt, now),
			LastStatus:    d.LastStatus,
		}
		if v.Admin {
			dv.Address = redactURL(d.Address)
			dv.LastError = clip(redactText(d.LastError))
		}
		if d.State == hub.SubSuspended {
			dv.Flags = append(dv.Flags, flagView{Text: "suspended", Bad: true})
		}
		if d.ConsecutiveErrors > 0 {
			dv.Flags = append(dv.Flags, flagView{Text: "failing", Bad: true})
		}
		if dv.Behind > 0 && d.State == hub.SubActive {
			dv.Flags = append(dv.Flags, flagView{Text: fmt.Sprintf("%d behind", dv.Behind)})
		}
		r.Deliveries = append(r.Deliveries, dv)
	}
	r.BouncingTotal, r.BouncingMore = rep.BouncingTotal, max(rep.BouncingTotal-len(rep.Bouncing), 0)
	for _, b := range rep.Bouncing {
		bv := bounceView{ID: b.ID, Node: b.NodeName, NodeLink: "/feeds/" + url.PathEscape(b.NodeName),
			Bounces: b.Bounces, FirstBounce: timeOf(b.FirstBounce, now)}
		if v.Admin {
			bv.Address, bv.LastError = b.Address, clip(b.LastError)
		}
		r.Bouncing = append(r.Bouncing, bv)
	}
	for _, p := range rep.Pings {
		pv := pingView{When: timeOf(p.ReceivedAt, now), Dialect: p.Dialect, Name: clip(p.Name), URL: redactURL(p.URL)}
		if v.Admin {
			pv.From = p.Remote
		}
		r.Pings = append(r.Pings, pv)
	}
	if v.Admin {
		for _, s := range rep.RecentSubscribers {
			r.Subscribers = append(r.Subscribers, subscriberView{
				Node:     s.NodeName,
				NodeLink: "/feeds/" + url.PathEscape(s.NodeName),
				Kind:     s.Kind,
				Address:  redactURL(s.Address),
				State:    s.State,
				Created:  timeOf(s.CreatedAt, now),
				Expires:  timeOf(s.ExpiresAt, now),
			})
		}
		r.SubscribersMore = max(r.SubscribersTotal-len(r.Subscribers), 0)
	}
	v.Report = r
}

// problems sums up what is wrong, the worst first.
func (v *statusPageView) problems() []problemView {
	var out []problemView
	add := func(bad bool, format string, args ...any) {
		out = append(out, problemView{Bad: bad, Text: fmt.Sprintf(format, args...)})
	}
	if !v.Connected {
		add(true, "Not connected to the XMPP server: XMPP subscribers get nothing until the component reconnects.")
	}
	if v.StoreError != "" {
		add(true, "The database does not answer.")
	}
	if v.ReportError != "" {
		add(true, "The figures below could not be read from the database.")
	}
	r := v.Report
	if r == nil {
		return out
	}
	if r.QueueSuspended > 0 {
		add(true, "%s suspended: they get nothing until their subscriber renews them.", plural(r.QueueSuspended, "HTTP subscription is", "HTTP subscriptions are"))
	}
	if r.QueueFailing > 0 {
		add(true, "%s failing; the oldest failure began %s.", plural(r.QueueFailing, "HTTP subscription is", "HTTP subscriptions are"), r.OldestFailure.Text)
	}
	if r.SourcesFailing > 0 {
		add(true, "%s.", plural(r.SourcesFailing, "source fails to fetch", "sources fail to fetch"))
	}
	if r.SourcesGone > 0 {
		add(false, "%s gone (410): nothing is fetched from them any more.", plural(r.SourcesGone, "source is", "sources are"))
	}
	if r.SourcesLate > 0 {
		add(false, "%s more than %s late: the fetcher is not keeping up.", plural(r.SourcesLate, "fetch is", "fetches are"), compactDuration(statusLateAfter))
	}
	return out
}

// plural writes "1 thing is" or "n things are".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// clip shortens s to statusMaxText characters.
func clip(s string) string {
	if utf8.RuneCountInString(s) <= statusMaxText {
		return s
	}
	r := []rune(s)
	return string(r[:statusMaxText]) + "…"
}
