package component

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync/atomic"
)

// stanzaIDs gives the messages the component sends on its own
// (notifications, chat answers) their ids, which RFC 6120 §8.1.3
// recommends and clients use to match errors and receipts. A random
// prefix per process and a counter keep them unique for the price of an
// increment. The prefix is hex, so an id never starts like the "pingd-…"
// ids of the acknowledgement markers and pingd's own queries (acks.go,
// queries.go).
type stanzaIDs struct {
	prefix string
	n      atomic.Uint64
}

func newStanzaIDs() *stanzaIDs {
	var r [6]byte
	_, _ = rand.Read(r[:]) // crypto/rand does not fail (Go 1.24+)
	return &stanzaIDs{prefix: hex.EncodeToString(r[:]) + "-"}
}

// next is a new id: one allocation, the string.
func (s *stanzaIDs) next() string {
	var buf [32]byte
	b := append(buf[:0], s.prefix...)
	return string(strconv.AppendUint(b, s.n.Add(1), 36))
}

// forNode is a new id of a notification about a node: the node's id goes
// into it ("n<node>."), so that an error answering the notification
// (XEP-0060 §12.3) names the node whose subscription bounced, whatever
// process sent it and however long ago.
func (s *stanzaIDs) forNode(nodeID int64) string {
	var buf [48]byte
	b := append(buf[:0], s.prefix...)
	b = append(b, 'n')
	b = strconv.AppendInt(b, nodeID, 36)
	b = append(b, '.')
	return string(strconv.AppendUint(b, s.n.Add(1), 36))
}

// nodeOfStanzaID returns the node a notification id of forNode names.
func nodeOfStanzaID(id string) (int64, bool) {
	_, rest, ok := strings.Cut(id, "-n")
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, ".")
	n, err := strconv.ParseInt(num, 36, 64)
	if !ok || err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
