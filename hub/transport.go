package hub

import "time"

// Transport is one way of telling subscribers: the component for XMPP, the
// delivery package for the HTTP kinds. cmd/pingd registers them.
type Transport interface {
	// Wake says the node's log grew or its subscriptions need work; nodeID
	// 0 means "look for any work". It must not block.
	Wake(nodeID int64)
}

// AppendedTransport is a Transport that can start on what a publish of
// this process appended without reading it back from the store: the hub
// calls Appended instead of Wake, with the node (as read for the publish,
// its LastSeq the last event's) and the events as the log stored them.
// Both are shared and must not be changed. Like Wake, it must not block;
// what it holds is a hint, never the record: the log in the store is.
type AppendedTransport interface {
	Transport
	Appended(node *Node, events []Event)
}

// Observer hears what the hub does, for metrics; its methods must be cheap
// and must not block.
type Observer interface {
	// Fetched reports one fetch: the HTTP status (0 when none came), its
	// error and how long it took.
	Fetched(status int, err error, took time.Duration)
	// Published reports items appended to node logs and, for a fetch that
	// followed a ping, the time since that ping.
	Published(items int, sincePing time.Duration)
}

type nopObserver struct{}

func (nopObserver) Fetched(int, error, time.Duration) {}
func (nopObserver) Published(int, time.Duration)      {}
