package hub

import "context"

// Transport is one way of telling subscribers: the component for XMPP, the
// delivery package for the HTTP kinds. cmd/pingd registers them.
type Transport interface {
	// Wake says the node's log grew or its subscriptions need work; nodeID
	// 0 means "look for any work". It must not block.
	Wake(nodeID int64)
}

// NodeDeletedListener is implemented by transports that tell subscribers
// when a node is deleted (XEP-0060 §8.4 delete notifications).
type NodeDeletedListener interface {
	NodeDeleted(ctx context.Context, node Node, subs []Subscription)
}
