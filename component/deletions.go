package component

import (
	"bufio"
	"context"
	"fmt"

	"github.com/pingd/pingd/hub"
)

// Delete notifications (XEP-0060 §8.4). Deleting a node records a
// hub.NodeDeletion in the same transaction, with the node's XMPP
// subscribers: the node, its log and its subscriptions are gone, so the
// deletion is the one record of what they are owed. The dispatcher sends
// the recorded deletions whenever it looks at every node (after each
// connection, on taking the lease, at each sweep) and when a node it was
// woken for is gone, and forgets one once the server acknowledged its
// notifications, like a batch of a node's log (acks.go). A deletion made
// while disconnected, before a restart or by another process therefore
// reaches its subscribers; one whose acknowledgement did not come is sent
// again (at-least-once). With Config.Shared a marker may reach another
// process, so there a deletion is forgotten once its write is flushed.

// deletionsRead bounds the deletions read at a time; more wait for the
// next look at every node.
const deletionsRead = 1000

// deliverDeletions writes the notifications of the recorded node
// deletions not yet written on this connection.
func (d *dispatcher) deliverDeletions(ctx context.Context, conn *connection) error {
	dels, err := d.store.NodeDeletions(ctx, deletionsRead)
	if err != nil {
		return err
	}
	for _, del := range dels {
		if conn.acks.deletionWritten(del.ID) {
			continue
		}
		if err := d.readyToWrite(ctx, conn); err != nil {
			return err
		}
		msgs := d.render.renderDeletion(del)
		largest := 0
		for _, m := range msgs {
			largest = max(largest, len(m))
		}
		err := conn.writeThen(func(w *bufio.Writer) error {
			for _, m := range msgs {
				w.Write(m)
			}
			return nil
		}, func() {
			conn.noteWrite(largest)
			if !d.shared {
				conn.acks.writtenDeletion(del.ID)
			}
		})
		if err != nil {
			return fmt.Errorf("%w: %w", errStream, err)
		}
		d.log.InfoContext(ctx, "sent delete notifications", "node", del.Node.Name, "subscribers", len(msgs))
		if d.shared {
			d.forgetDeletions(ctx, conn, []int64{del.ID})
			continue
		}
		if err := d.writeMarker(conn); err != nil {
			return fmt.Errorf("%w: %w", errStream, err)
		}
	}
	return nil
}

// renderDeletion renders a deletion's notification to each subscriber:
// the XEP-0060 <delete/>, or words to a reader of plain messages.
func (rd *renderer) renderDeletion(del hub.NodeDeletion) [][]byte {
	id := rd.stanzaIDs.forNode(del.Node.ID) // one for every copy
	msgs := make([][]byte, 0, len(del.Subscribers))
	for _, s := range del.Subscribers {
		if s.Options.Format == hub.FormatMessage {
			msgs = append(msgs, rd.renderDeletePlain(del.Node, s, id))
			continue
		}
		msgs = append(msgs, rd.renderDelete(del.Node, s.Address, id))
	}
	return msgs
}

// forgetDeletions forgets node deletions whose notifications the server
// acknowledged; one that cannot be forgotten is written again.
func (d *dispatcher) forgetDeletions(ctx context.Context, conn *connection, ids []int64) {
	if len(ids) == 0 {
		return
	}
	// Acknowledged means routed by the server: forget them even when
	// pingd is stopping, or they would be sent again.
	// Their ids leave the connection's record of written deletions
	// first: SQLite gives a new row the id of the last one once that is
	// forgotten, and a deletion recorded as written is skipped. A list
	// read before the rows are gone may write one again: a duplicate,
	// never a deletion withheld.
	conn.acks.deletionsNotForgotten(ids)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cursorTimeout)
	defer cancel()
	if err := d.store.ForgetNodeDeletions(sctx, ids); err != nil {
		d.log.ErrorContext(ctx, "forget sent node deletions", "deletions", len(ids), "err", err)
		d.requeueLater(0)
	}
}
