// Package testenv starts the real parts integration tests and benchmarks
// need: a private Prosody on free loopback ports with pingd's component (and
// Prosody's own pubsub for comparison) configured, and XMPP client sessions
// logged in to it. Nothing here is mocked; the tests skip only in -short
// mode, and fail when Prosody is not installed.
//
// It is for tests and benchmarks only: no production code imports it. It
// targets loopback addresses only and cleans up what it starts.
package testenv
