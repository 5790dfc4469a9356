package main

import (
	"time"

	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/metrics"
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
