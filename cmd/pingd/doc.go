// Command pingd is the change-notification daemon: `pingd serve` runs it;
// `pingd version` and `pingd --help` say what it is and how to set it up.
//
// This package reads configuration (flags and PINGD_* environment
// variables), wires the store, hub, component, delivery and httpapi
// together, and runs subcommands. It holds no protocol logic.
package main
