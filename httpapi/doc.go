// Package httpapi is pingd's HTTP side: the gorilla/mux router for pings
// (XML-RPC /RPC2, REST, CNWS, WebSub), GetPingd subscriptions and whitelist
// requests, discovery documents, the nodes' own feeds, the admin API,
// health, readiness and metrics.
//
// It turns requests into hub calls and answers in each protocol's own
// format. Every body it reads is size-capped. It may not touch XMPP (it
// never imports component) nor the database directly.
package httpapi
