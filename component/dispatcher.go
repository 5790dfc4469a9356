package component

import (
	"sync/atomic"
	"time"
)

// dispatcher is the notification side of the component: the per-node
// work queue and its loop (notify.go), the rendering and fan-out of a
// node's events (fanout.go, render.go, readable.go, diff.go, budget.go),
// digests (digests.go), the acknowledgement markers (acks.go) and XEP-0033
// multicast (multicast.go, with pingd's own queries, queries.go). The
// Component keeps the connection, the leadership and the requests served
// over the stream, and calls the dispatcher: Wake queues, Run starts its
// loop, a new connection has it probe, record acknowledgements and look
// for a multicast service.
type dispatcher struct {
	*sharedState
	store      Store
	ackTimeout time.Duration
	// render renders the notifications (render.go).
	render *renderer

	work *workQueue

	// multicast settings (Config.Multicast…): mode is MulticastAuto,
	// MulticastOff or "service" (multicastService given).
	multicastMode    string
	multicastService string
	multicastDomain  string
	multicastMax     int
	multicastShare   int
	// multicastChecked counts the connections whose look for a multicast
	// service ended (tests wait for it).
	multicastChecked atomic.Int64
	// sentUnicast and sentMulticast count the notification stanzas written
	// one per subscriber and through the multicast service.
	sentUnicast, sentMulticast atomic.Int64
}
