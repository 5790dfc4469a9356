package store_test

import (
	"context"
	"testing"

	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
	"github.com/pingd/pingd/store/storetest"
)

// openPostgres opens a store in a fresh schema of the PINGD_TEST_POSTGRES
// server; the schema is dropped when the test ends.
func openPostgres(t *testing.T) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), testenv.PostgresURL(t), store.Options{Logger: quietLogger(), MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	if s.Backend() != "postgres" {
		t.Fatalf("Backend() = %q", s.Backend())
	}
	return s
}

func TestPostgres(t *testing.T) {
	testenv.SkipWithoutPostgres(t)
	storetest.Run(t, openPostgres)
}
