package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/pingd/pingd/store"
	"github.com/pingd/pingd/store/storetest"
)

// openSQLite opens a fresh SQLite store in a temporary directory.
func openSQLite(t *testing.T) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "pingd.db"), store.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSQLite(t *testing.T) {
	storetest.Run(t, openSQLite)
}

// TestSQLiteShared runs the checks of two processes on one database on
// two handles of one file.
func TestSQLiteShared(t *testing.T) {
	storetest.RunShared(t, func(t *testing.T) (store.Store, store.Store) {
		dsn := filepath.Join(t.TempDir(), "pingd.db")
		var stores [2]store.Store
		for i := range stores {
			s, err := store.Open(context.Background(), dsn, store.Options{Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			stores[i] = s
		}
		return stores[0], stores[1]
	})
}
