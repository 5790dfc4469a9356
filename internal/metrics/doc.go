// Package metrics defines every Prometheus series pingd exports, all named
// pingd_…, in one registry served at /metrics. Packages record through the
// small functions here (or through hooks that cmd/pingd points here), so the
// names, labels and buckets stay in one place.
//
// It may import only client_golang and the standard library; the packages it
// measures do not import it (cmd/pingd connects them).
package metrics
