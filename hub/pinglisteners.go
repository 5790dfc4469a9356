package hub

import (
	"context"
	"slices"
)

// A PingListener hears of every ping the hub recorded, after it is stored
// and the sources it names are due. What pingd does beside recording a
// ping (relaying it to other ping servers, looking at a homepage a ping
// named for the feed it links to) are listeners that cmd/pingd registers,
// so the entry points only hand pings to the hub.
type PingListener interface {
	// PingRecorded is called on the recording goroutine: it must return
	// quickly (queue the work, or start it on its own goroutine).
	PingRecorded(ctx context.Context, rec PingRecord)
}

// PingRecord is what a listener hears of one recorded ping.
type PingRecord struct {
	// Ping is the ping as stored, with Relayed as it came.
	Ping Ping
	// URLs are the URLs the ping named, as the entry point gave them (for
	// extendedPing the feed first, then the weblog's page).
	URLs []string
	// Matched is how many followed sources the ping made due.
	Matched int
}

// AddPingListener registers l for every ping recorded from now on.
func (h *Hub) AddPingListener(l PingListener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pingListeners = append(h.pingListeners, l)
}

func (h *Hub) pingRecorded(ctx context.Context, rec PingRecord) {
	h.mu.RLock()
	listeners := slices.Clone(h.pingListeners)
	h.mu.RUnlock()
	for _, l := range listeners {
		l.PingRecorded(ctx, rec)
	}
}
