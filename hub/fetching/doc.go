// Package fetching is pingd's fetch engine: the loop that claims due
// sources in batches under leases, the per-host queues that keep pingd
// polite to origins (FetchesPerHost at once, FetchHostSpacing between two
// starts, a pause after a 429 or 503) without a worker ever waiting for a
// host, the unchanged writer that stores the many fetches that changed
// nothing in one transaction, the release of what a fetch cut off by
// shutdown (or a process that died) left leased, and the wait of a
// request that made pingd learn of a source for that source's baseline.
//
// Its room: scheduling and carrying out fetches, and storing their
// outcomes through its own Store (store.go). What a fetch means (its
// outcome, hub.OutcomeOf; which entries are new, hub.FetchNewsOf; when a
// source is due) is decided by the hub's pure rules, and the fetch itself
// is the hub.Fetcher it is given (package feed). It implements
// hub.FetchEngine, the seam through which the hub's use cases wake it and
// wait for a baseline; cmd/pingd builds it and gives it to the hub, whose
// Run runs it.
//
// Why under hub/: it speaks only the hub's vocabulary (sources, fetch
// outcomes, leases, reasons) and no wire format, so it is the core's
// engine beside its use cases rather than part of feed, which parses and
// renders documents and which the engine reaches only through hub.Fetcher.
// What it may not touch: it imports hub and nothing else of pingd; it
// never reads nodes or subscriptions, and tells the hub of the nodes a
// fetch grew through the function Run is given.
package fetching
