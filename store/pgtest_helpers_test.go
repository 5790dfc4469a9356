package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// postgresEnv names the variable holding the URL of a PostgreSQL server the
// tests may create and drop schemas in.
const postgresEnv = "PINGD_TEST_POSTGRES"

// skipWithoutPostgres skips the test when no PostgreSQL server is named.
func skipWithoutPostgres(t testing.TB) {
	t.Helper()
	if os.Getenv(postgresEnv) == "" {
		t.Skipf("%s is not set; store/testdata/start-postgres.sh starts a server", postgresEnv)
	}
}

// testPostgresURL creates a schema of its own on the server named by
// PINGD_TEST_POSTGRES, drops it when the test ends, and returns a URL whose
// connections work in it. It skips the test when the variable is absent.
func testPostgresURL(t testing.TB) string {
	t.Helper()
	skipWithoutPostgres(t)
	base := os.Getenv(postgresEnv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to %s: %v", redactURL(base), err)
	}
	defer conn.Close(ctx)
	b := make([]byte, 6)
	rand.Read(b)
	schema := "pingd_test_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("connect to drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", postgresEnv, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
