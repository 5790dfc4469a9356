package store

import (
	"context"
	"testing"

	"github.com/pingd/pingd/hub"
)

// TestRevokePlainTypeHasItsOwnColumn: a revoke's PlainType is stored in
// the events' plain_type column, and its publisher column stays the
// publisher's (empty), so a reader of the table is not misled.
func TestRevokePlainTypeHasItsOwnColumn(t *testing.T) {
	for _, bc := range backendCases() {
		t.Run(bc.name, func(t *testing.T) {
			ctx := context.Background()
			s := bc.migrated(t)
			n := &hub.Node{Name: "n", NodeConfig: hub.DefaultNodeConfig()}
			if err := s.CreateNode(ctx, n); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Append(ctx, n.ID, []hub.Event{{Kind: hub.EventRevoke, Address: "x@example.org", PlainType: hub.NotifyChat}}); err != nil {
				t.Fatal(err)
			}
			var plainType, publisher string
			if err := s.write.QueryRowContext(ctx, `SELECT plain_type, publisher FROM events WHERE node_id = $1 AND kind = 'revoke'`,
				n.ID).Scan(&plainType, &publisher); err != nil {
				t.Fatal(err)
			}
			if plainType != hub.NotifyChat || publisher != "" {
				t.Fatalf("revoke row: plain_type %q, publisher %q; want %q and none", plainType, publisher, hub.NotifyChat)
			}
		})
	}
}
