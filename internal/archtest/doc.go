// Package archtest holds the test that keeps pingd's import graph to the
// layering that docs/architecture.md writes down: hub at the centre
// importing no other pingd package, the protocol vocabulary packages
// beside it, the adapters (httpapi, component, upstream) and the
// listeners (delivery) around it, and the leaves under internal/ that
// know nothing of pingd. It runs `go list` over the module and fails,
// naming the package, the import and the rule it breaks, when a
// production import leaves the rules; test files may import what they
// need to start real parts.
//
// It is a room of its own because the rules are about every package at
// once and belong to none of them; it has no production code and nothing
// imports it. What it may not touch: it only reads the graph, never the
// packages' code.
package archtest
