package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry holds pingd's series plus the Go runtime and process collectors.
var Registry = prometheus.NewRegistry()

// latencyBuckets span a loopback millisecond to a slow minute.
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

var (
	// Pings counts pings by dialect and outcome (accepted, refused,
	// rate_limited, error).
	Pings = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pingd_pings_total", Help: "Pings received, by dialect and outcome (accepted, refused, rate_limited: answered 429, error).",
	}, []string{"dialect", "outcome"})
	// Fetches counts source fetches by status class (2xx, 226, 304, 3xx, 4xx, 410, 5xx, error).
	Fetches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pingd_fetches_total", Help: "Source fetches, by HTTP status class.",
	}, []string{"class"})
	FetchDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "pingd_fetch_duration_seconds", Help: "Time to fetch a source.", Buckets: latencyBuckets,
	})
	// ItemsPublished counts items appended to node logs (from fetches and XMPP publishes).
	ItemsPublished = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pingd_items_published_total", Help: "Items appended to node logs.",
	})
	// Notifications counts notifications by transport and outcome.
	Notifications = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pingd_notifications_total", Help: "Notifications sent, by transport (xmpp, webhook, websub, rsscloud, cnws) and outcome.",
	}, []string{"transport", "outcome"})
	// DeliveryDuration is the time of one outbound HTTP delivery attempt.
	DeliveryDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "pingd_delivery_duration_seconds", Help: "Duration of outbound HTTP delivery attempts, by transport.", Buckets: latencyBuckets,
	}, []string{"transport"})
	// Retries counts failed HTTP deliveries that were scheduled again.
	Retries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pingd_delivery_retries_total", Help: "HTTP deliveries scheduled for a retry, by transport.",
	}, []string{"transport"})
	// PingToPublish is the time from a ping to its items being in the log.
	PingToPublish = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "pingd_ping_to_publish_seconds", Help: "Time from a ping to the fetched items being stored.", Buckets: latencyBuckets,
	})
	// PublishToNotification is the time an event waits in the log before it
	// is sent; with PingToPublish it gives ping→notification.
	PublishToNotification = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "pingd_publish_to_notification_seconds", Help: "Time from an item being stored to its notification being sent, by transport.", Buckets: latencyBuckets,
	}, []string{"transport"})
)

// componentReconnects reads how often the component connected again after
// its first connection; set by SetComponentReconnects.
var componentReconnects atomic.Pointer[func() int64]

// SetComponentReconnects tells pingd_component_reconnects_total where to
// read the component's count of connections after the first.
func SetComponentReconnects(f func() int64) { componentReconnects.Store(&f) }

var componentReconnectsTotal = prometheus.NewCounterFunc(prometheus.CounterOpts{
	Name: "pingd_component_reconnects_total", Help: "Successful component connections after the first.",
}, func() float64 {
	if f := componentReconnects.Load(); f != nil {
		return float64((*f)())
	}
	return 0
})

func init() {
	// The Go runtime and process series keep their standard names (go_…,
	// process_…), which dashboards and alerts expect; every series of
	// pingd's own is pingd_….
	Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	Registry.MustRegister(
		Pings, Fetches, FetchDuration, ItemsPublished, Notifications, DeliveryDuration,
		Retries, PingToPublish, PublishToNotification, componentConnected, componentReconnectsTotal,
		stanzaBudget, stanzasShrunk, xmppCollector{}, stateCollector{},
	)
}

// Handler serves the registry in the Prometheus text format.
func Handler() http.Handler {
	return promhttp.HandlerFor(Registry, promhttp.HandlerOpts{})
}

// FetchClass is the label of a fetch outcome.
func FetchClass(status int, err error) string {
	switch {
	case status == 0 && err != nil:
		return "error"
	case status == 226, status == 304, status == 410:
		return strconv.Itoa(status)
	case status >= 200 && status < 300:
		return "2xx"
	case status >= 300 && status < 400:
		return "3xx"
	case status >= 400 && status < 500:
		return "4xx"
	case status >= 500:
		return "5xx"
	}
	return "error"
}

// Since observes the seconds since t in h, ignoring zero times.
func Since(h prometheus.Observer, t time.Time) {
	if !t.IsZero() {
		h.Observe(time.Since(t).Seconds())
	}
}

// componentUp reports whether the component stream is up; set by
// SetComponentState.
var componentUp atomic.Pointer[func() bool]

// SetComponentState tells the pingd_component_connected gauge where to
// read the component's state.
func SetComponentState(up func() bool) { componentUp.Store(&up) }

var componentConnected = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
	Name: "pingd_component_connected", Help: "1 while the XMPP component stream is up.",
}, func() float64 {
	if f := componentUp.Load(); f != nil && (*f)() {
		return 1
	}
	return 0
})

// componentBudget reads the component's stanza budget and the count of
// stanzas sent smaller or left out to keep within it; set by
// SetComponentBudget.
var componentBudget atomic.Pointer[func() (int, int64)]

// SetComponentBudget tells pingd_xmpp_stanza_budget_bytes and
// pingd_xmpp_stanzas_shrunk_total where to read the component's budget.
func SetComponentBudget(f func() (budgetBytes int, shrunk int64)) { componentBudget.Store(&f) }

var (
	stanzaBudget = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pingd_xmpp_stanza_budget_bytes", Help: "The largest stanza the component writes (lower once the XMPP server refused larger ones).",
	}, func() float64 {
		if f := componentBudget.Load(); f != nil {
			b, _ := (*f)()
			return float64(b)
		}
		return 0
	})
	stanzasShrunk = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "pingd_xmpp_stanzas_shrunk_total", Help: "XMPP notifications and answers sent without payloads, links or patches, or left out, to keep within the stanza budget.",
	}, func() float64 {
		if f := componentBudget.Load(); f != nil {
			_, n := (*f)()
			return float64(n)
		}
		return 0
	})
)

// IsStandardSeries reports whether a sample line of /metrics belongs to
// one of StandardFamilies.
func IsStandardSeries(line string) bool {
	standard, err := StandardFamilies()
	if err != nil {
		return false
	}
	name, _, _ := strings.Cut(line, " ")
	name, _, _ = strings.Cut(name, "{")
	if standard[name] {
		return true
	}
	// A histogram's or summary's lines carry a suffix.
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && standard[base] {
			return true
		}
	}
	return false
}

// StandardFamilies are the names of the Go runtime and process series
// (go_…, process_…) /metrics serves beside pingd's own, as the standard
// collectors name them here: the only series not named pingd_….
func StandardFamilies() (map[string]bool, error) { return standardFamilies() }

var standardFamilies = sync.OnceValues(func() (map[string]bool, error) {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mfs, err := r.Gather()
	if err != nil {
		return nil, err
	}
	names := make(map[string]bool, len(mfs))
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	return names, nil
})
