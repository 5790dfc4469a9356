// Package storetest is the conformance test of store.Store, sliced as the
// store's users declare their ports: one Run function per port (RunNodes,
// RunLog, RunSources, RunFetches, RunSubscriptions, RunDeliveries,
// RunReaders, RunAffiliations, RunPings, RunMaintenance, RunXMPP,
// RunHealth; Ports lists them), each run by every backend against a fresh
// database of its own, so SQLite and PostgreSQL are held to the same
// contracts. Run runs every slice; RunShared the checks of two processes
// on one database.
//
// The slices and the helpers every test uses are in storetest.go, with the tests
// about times and the log window; the others are grouped by what they
// check: nodes.go (nodes, affiliations), events.go (the log, items,
// pruning), sources.go (sources and their claims), fetches.go (applying
// fetches), unchangedfetches.go (unchanged fetches written in batches,
// claims with subscriber counts), subscriptions.go, deliveries.go (delivery claims and states),
// changes.go (pending subscription changes), pings.go, opennodes.go and
// readers.go (XMPP readers: last published, bounces, digests), and
// bounds.go (counting implicit nodes and callback hosts, deleting unused
// nodes and sources).
//
// It only calls the Store interface; it never reaches into a backend's
// tables, and it has no place outside tests.
package storetest
