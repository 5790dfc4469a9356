// Command pingd is the change-notification daemon: `pingd serve` runs it;
// `pingd version` and `pingd --help` say what it is and how to set it up.
//
// This package reads configuration (flags and PINGD_* environment
// variables, config.go), wires the store, hub, component, delivery and
// httpapi together, and runs subcommands. It holds no protocol logic.
//
// build.go makes the daemon's parts in order, one build function each
// (store, hub with its fetcher and schedule, component, delivery, relay,
// HTTP API, upstream); they share one outbound HTTP client, SSRF-guarded
// with one connection pool, and one User-Agent. serve.go runs the parts
// and shuts them down in order.
package main
