// Package bench measures pingd side by side with what users would run
// instead: Prosody's and ejabberd's own pubsub, a no-logic component that
// marks the limit of the component protocol, XEP-0033 multicast, and plain
// net/http. Every figure that matters is a ratio measured in one process
// run with the two sides alternating, because absolute numbers on a shared
// machine mean little.
//
// Its room: the measurement harness only — light XMPP clients and a raw
// component that read stanzas with a splitter instead of a full XML
// decoder (the same clients for every target), an in-process pingd wired
// as cmd/pingd wires it (its goroutines labelled side=pingd for profiles),
// loopback feed servers and webhook sinks, a farm of loopback origin hosts
// with a plain fetcher to poll them side by side with pingd's fetch loop
// (origins.go, polling.go), and the Markdown tables that go into
// docs/benchmarks.md. It may not touch pingd's packages; it only calls
// their exported APIs, and nothing in pingd imports it.
//
// Why a package of benchmarks rather than cmd/pingd-bench: the harness is
// built on internal/testenv, which starts real Prosody and ejabberd nodes
// for a testing.TB and cleans them up with it; running the measurements as
// Go benchmarks (go test -bench, driven by make bench and make bench-quick)
// keeps that lifecycle, keeps them out of make test (benchmarks never run
// there; only a few seconds of smoke tests with tiny sizes do), and ships
// nothing extra in the pingd binary.
package bench
