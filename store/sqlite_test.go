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
