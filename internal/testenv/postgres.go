package testenv

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

// PostgresEnv names the variable holding the URL of a PostgreSQL server the
// tests may create and drop schemas in. make test starts a private one
// (store/testdata/start-postgres.sh) when it is not set.
const PostgresEnv = "PINGD_TEST_POSTGRES"

// SkipWithoutPostgres ends the test when no PostgreSQL server is named: a
// skip, or a failure when IntegrationRequired (see Missing).
func SkipWithoutPostgres(t testing.TB) {
	t.Helper()
	if os.Getenv(PostgresEnv) == "" {
		Missing(t, "no PostgreSQL server: %s is not set (scripts/with-postgres.sh, which make test uses, starts a private one)", PostgresEnv)
	}
}

// PostgresURL creates a schema of its own on the server named by
// PINGD_TEST_POSTGRES, drops it when the test ends (after whatever the
// test started later, such as daemons, has stopped), and returns a URL
// whose connections work in it. It skips the test when the variable is
// absent (fails under PINGD_INTEGRATION=require).
func PostgresURL(t testing.TB) string {
	t.Helper()
	SkipWithoutPostgres(t)
	base := os.Getenv(PostgresEnv)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", PostgresEnv, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to %s (%s): %v", PostgresEnv, redactedPostgresURL(u), err)
	}
	defer conn.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
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
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// redactedPostgresURL is u without its passwords, for messages.
func redactedPostgresURL(u *url.URL) string {
	c := *u
	q := c.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		c.RawQuery = q.Encode()
	}
	return c.Redacted()
}
