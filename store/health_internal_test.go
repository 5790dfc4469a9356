package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// TestCheckAnswersWhileTheReadPoolIsBusy holds every connection of the
// read pool, as a crowd of readers would, and asks Check: it answers at
// once on its own connection instead of waiting for a pooled one until
// its deadline (which made /healthz answer 503 under read load).
func TestCheckAnswersWhileTheReadPoolIsBusy(t *testing.T) {
	for _, backend := range []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "pingd.db") }},
		{"postgres", func(t *testing.T) string { return testenv.PostgresURL(t) }},
	} {
		t.Run(backend.name, func(t *testing.T) {
			ctx := context.Background()
			s0, err := Open(ctx, backend.dsn(t), quietOptions())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s0.Close() })
			s := s0.(*sqlStore)
			var held []*sql.Conn
			t.Cleanup(func() {
				for _, c := range held {
					c.Close()
				}
			})
			for range s.read.Stats().MaxOpenConnections {
				c, err := s.read.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, c)
			}
			// The pool is exhausted: a read has to wait.
			waitCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			_, err = s.read.Conn(waitCtx)
			cancel()
			if err == nil {
				t.Fatal("the read pool gave out another connection; the test holds too few")
			}
			checkCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			if err := s.Check(checkCtx); err != nil {
				t.Fatalf("Check with every read connection busy: %v", err)
			}
		})
	}
}
