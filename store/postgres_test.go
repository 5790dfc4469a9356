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

// TestPostgresShared runs the checks of two processes on one database on
// two stores opened on one schema.
func TestPostgresShared(t *testing.T) {
	testenv.SkipWithoutPostgres(t)
	storetest.RunShared(t, func(t *testing.T) (store.Store, store.Store) {
		url := testenv.PostgresURL(t)
		var stores [2]store.Store
		for i := range stores {
			s, err := store.Open(context.Background(), url, store.Options{Logger: quietLogger(), MaxConns: 4})
			if err != nil {
				t.Fatal(err)
			}
			stores[i] = s
		}
		return stores[0], stores[1]
	})
}
