package main

import (
	"context"
	"time"

	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/metrics"
	"github.com/pingd/pingd/store"
)

// hubMetrics records the hub's work in the Prometheus series.
type hubMetrics struct{}

func (hubMetrics) Fetched(status int, err error, took time.Duration) {
	metrics.Fetches.WithLabelValues(metrics.FetchClass(status, err)).Inc()
	metrics.FetchDuration.Observe(took.Seconds())
}

func (hubMetrics) Published(items int, sincePing time.Duration) {
	metrics.ItemsPublished.Add(float64(items))
	if sincePing > 0 {
		metrics.PingToPublish.Observe(sincePing.Seconds())
	}
}

// observeDelivery records one outbound HTTP attempt.
func observeDelivery(kind hub.Kind, outcome string, took time.Duration) {
	metrics.Notifications.WithLabelValues(string(kind), outcome).Inc()
	switch outcome {
	case delivery.OutcomeDelivered, delivery.OutcomeRetry, delivery.OutcomeRemoved, delivery.OutcomeSuspended:
		metrics.DeliveryDuration.WithLabelValues(string(kind)).Observe(took.Seconds())
	}
	if outcome == delivery.OutcomeRetry {
		metrics.Retries.WithLabelValues(string(kind)).Inc()
	}
}

// observePing records one ping's dialect and outcome.
func observePing(dialect, outcome string) {
	metrics.Pings.WithLabelValues(dialect, outcome).Inc()
}

// metricsLateAfter is how long past its due time a fetch must be to count
// as late, as the status page counts it.
const metricsLateAfter = 5 * time.Minute

// metricsState reads the database's figures for /metrics: the status
// page's report with its lists cut to one row, and the upstream
// subscriptions.
func metricsState(st store.Store) func(ctx context.Context) (metrics.State, error) {
	return func(ctx context.Context) (metrics.State, error) {
		now := time.Now()
		rep, err := st.StatusReport(ctx, store.StatusQuery{Limit: 1, LateBefore: now.Add(-metricsLateAfter), Now: now})
		if err != nil {
			return metrics.State{}, err
		}
		ups, err := st.Upstreams(ctx)
		if err != nil {
			return metrics.State{}, err
		}
		s := metrics.State{
			Nodes:                 rep.NodesTotal,
			Subscriptions:         make(map[string]int, len(rep.Subscribers)),
			SourcesFollowed:       rep.SourcesTotal,
			SourcesDue:            rep.FetchDue,
			SourcesLate:           rep.SourcesLate,
			SourcesFailing:        rep.SourcesFailing,
			DeliveryPending:       rep.Queue.Pending,
			DeliverySuspended:     rep.Queue.Suspended,
			DeliveryFailing:       rep.Queue.Failing,
			DeliveryBehind:        rep.Queue.Behind,
			DeliveryBacklogEvents: rep.Queue.EventsBehind,
			XMPPBacklogEvents:     rep.EventsBehindXMPP,
			XMPPBouncing:          rep.BouncingTotal,
			Upstream:              map[string]int{},
		}
		for k, n := range rep.Subscribers {
			s.Subscriptions[string(k)] = n
		}
		for _, u := range ups {
			s.Upstream[u.State]++
		}
		return s, nil
	}
}
