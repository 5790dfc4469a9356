package metrics

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// XMPP notification counts, read from the component at scrape time.

// xmppCounts reads the component's notification counts; set by
// SetXMPPCounts.
var xmppCounts atomic.Pointer[func() (unicast, multicast, bounced int64)]

// SetXMPPCounts tells pingd_xmpp_notifications_sent_total and
// pingd_xmpp_notifications_bounced_total where to read their counts.
func SetXMPPCounts(f func() (unicast, multicast, bounced int64)) { xmppCounts.Store(&f) }

var (
	xmppSentDesc = prometheus.NewDesc("pingd_xmpp_notifications_sent_total",
		"XMPP notification stanzas written, one per subscriber (unicast) or through the XEP-0033 multicast service (multicast).",
		[]string{"via"}, nil)
	xmppBouncedDesc = prometheus.NewDesc("pingd_xmpp_notifications_bounced_total",
		"XMPP notifications answered with an error by the subscriber's server.", nil, nil)
)

type xmppCollector struct{}

func (xmppCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- xmppSentDesc
	ch <- xmppBouncedDesc
}

func (xmppCollector) Collect(ch chan<- prometheus.Metric) {
	var uni, multi, bounced int64
	if f := xmppCounts.Load(); f != nil {
		uni, multi, bounced = (*f)()
	}
	ch <- prometheus.MustNewConstMetric(xmppSentDesc, prometheus.CounterValue, float64(uni), "unicast")
	ch <- prometheus.MustNewConstMetric(xmppSentDesc, prometheus.CounterValue, float64(multi), "multicast")
	ch <- prometheus.MustNewConstMetric(xmppBouncedDesc, prometheus.CounterValue, float64(bounced))
}

// State is what the database says of pingd's work, over every process
// sharing it: read at most once per StateMaxAge, whatever the number of
// scrapes.
type State struct {
	Nodes int
	// Subscriptions counts subscriptions by kind (xmpp, websub, …).
	Subscriptions map[string]int
	// Sources: followed, due now and waiting for a fetch worker, late
	// (due for longer than the status page's threshold), failing.
	SourcesFollowed, SourcesDue, SourcesLate, SourcesFailing int
	// HTTP deliveries: subscriptions pending verification, suspended,
	// failing, behind their node's log, and the events they are behind.
	DeliveryPending, DeliverySuspended, DeliveryFailing, DeliveryBehind int
	DeliveryBacklogEvents                                               int64
	// XMPP: events written to the log and not yet notified, and
	// subscriptions whose notifications bounce.
	XMPPBacklogEvents int64
	XMPPBouncing      int
	// Upstream subscriptions by state (pending, active, failed).
	Upstream map[string]int
}

// StateMaxAge is how long a reading of State serves scrapes.
const StateMaxAge = 10 * time.Second

// stateTimeout bounds one reading.
const stateTimeout = 5 * time.Second

var (
	stateReader atomic.Pointer[func(context.Context) (State, error)]
	stateMu     sync.Mutex
	stateLast   State
	stateOK     bool
	stateAt     time.Time
)

// SetStateReader tells the state series where to read State.
func SetStateReader(f func(context.Context) (State, error)) {
	stateReader.Store(&f)
	stateMu.Lock()
	stateAt = time.Time{}
	stateMu.Unlock()
}

func readState() (State, bool, bool) {
	f := stateReader.Load()
	if f == nil {
		return State{}, false, false
	}
	stateMu.Lock()
	defer stateMu.Unlock()
	if stateAt.IsZero() || time.Since(stateAt) >= StateMaxAge {
		ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
		st, err := (*f)(ctx)
		cancel()
		stateAt = time.Now()
		stateOK = err == nil
		if stateOK {
			stateLast = st
		}
	}
	return stateLast, stateOK, true
}

func gaugeDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	stateOKDesc         = gaugeDesc("pingd_state_reading_ok", "1 when the last reading of the database's figures (the series below) succeeded; they are left out while it fails.")
	nodesDesc           = gaugeDesc("pingd_nodes", "Nodes.")
	subscriptionsDesc   = gaugeDesc("pingd_subscriptions", "Subscriptions, by kind (xmpp, websub, rsscloud, cnws, webhook).", "kind")
	sourcesFollowedDesc = gaugeDesc("pingd_sources_followed", "Sources followed by a node.")
	sourcesDueDesc      = gaugeDesc("pingd_sources_due", "Sources due for a fetch and waiting for a fetch worker.")
	sourcesLateDesc     = gaugeDesc("pingd_sources_late", "Sources whose fetch has been due for more than 5 minutes: the fetcher is not keeping up.")
	sourcesFailingDesc  = gaugeDesc("pingd_sources_failing", "Sources whose last fetch failed.")
	deliverySubsDesc    = gaugeDesc("pingd_delivery_subscriptions", "HTTP subscriptions by state: pending (verification of intent), suspended, failing (last attempt failed), behind (the node's log is ahead).", "state")
	deliveryBacklogDesc = gaugeDesc("pingd_delivery_backlog_events", "Events HTTP subscriptions have yet to get.")
	xmppBacklogDesc     = gaugeDesc("pingd_xmpp_backlog_events", "Events stored and not yet notified over XMPP.")
	xmppBouncingDesc    = gaugeDesc("pingd_xmpp_subscriptions_bouncing", "XMPP subscriptions whose notifications bounce.")
	upstreamDesc        = gaugeDesc("pingd_upstream_subscriptions", "Subscriptions pingd holds at upstream hubs and clouds, by state (pending, active, failed).", "state")
)

// stateCollector reports State.
type stateCollector struct{}

func (stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{stateOKDesc, nodesDesc, subscriptionsDesc, sourcesFollowedDesc, sourcesDueDesc,
		sourcesLateDesc, sourcesFailingDesc, deliverySubsDesc, deliveryBacklogDesc, xmppBacklogDesc, xmppBouncingDesc, upstreamDesc} {
		ch <- d
	}
}

func (stateCollector) Collect(ch chan<- prometheus.Metric) {
	st, ok, set := readState()
	if !set {
		return
	}
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if !ok {
		g(stateOKDesc, 0)
		return
	}
	g(stateOKDesc, 1)
	g(nodesDesc, float64(st.Nodes))
	for kind, n := range st.Subscriptions {
		g(subscriptionsDesc, float64(n), kind)
	}
	g(sourcesFollowedDesc, float64(st.SourcesFollowed))
	g(sourcesDueDesc, float64(st.SourcesDue))
	g(sourcesLateDesc, float64(st.SourcesLate))
	g(sourcesFailingDesc, float64(st.SourcesFailing))
	g(deliverySubsDesc, float64(st.DeliveryPending), "pending")
	g(deliverySubsDesc, float64(st.DeliverySuspended), "suspended")
	g(deliverySubsDesc, float64(st.DeliveryFailing), "failing")
	g(deliverySubsDesc, float64(st.DeliveryBehind), "behind")
	g(deliveryBacklogDesc, float64(st.DeliveryBacklogEvents))
	g(xmppBacklogDesc, float64(st.XMPPBacklogEvents))
	g(xmppBouncingDesc, float64(st.XMPPBouncing))
	for _, state := range []string{"pending", "active", "failed"} {
		g(upstreamDesc, float64(st.Upstream[state]), state)
	}
}
