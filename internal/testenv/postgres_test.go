package testenv

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestPostgresURL: each call gets a schema of its own, which its
// connections work in, and which is gone when the test ends.
func TestPostgresURL(t *testing.T) {
	SkipWithoutPostgres(t)
	var schemas []string
	t.Run("schemas", func(t *testing.T) {
		for range 2 {
			dsn := PostgresURL(t)
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			schemas = append(schemas, u.Query().Get("search_path"))
			conn, err := pgx.Connect(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			var current string
			err = conn.QueryRow(context.Background(), "SELECT current_schema()").Scan(&current)
			conn.Close(context.Background())
			if err != nil || current != schemas[len(schemas)-1] {
				t.Fatalf("current_schema() = %q, %v; want %q", current, err, schemas[len(schemas)-1])
			}
		}
		if schemas[0] == schemas[1] {
			t.Fatalf("two calls share the schema %s", schemas[0])
		}
	})
	conn, err := pgx.Connect(context.Background(), PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var left int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM information_schema.schemata WHERE schema_name = ANY($1)", schemas).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d of the schemas %v are left after their test", left, schemas)
	}
}

func TestRedactedPostgresURL(t *testing.T) {
	u, _ := url.Parse("postgres://pingd:hunter2@db.example/pingd?password=hunter3")
	got := redactedPostgresURL(u)
	if got == "" || containsAny(got, "hunter2", "hunter3") {
		t.Errorf("redacted %q", got)
	}
	if u.String() != "postgres://pingd:hunter2@db.example/pingd?password=hunter3" {
		t.Errorf("the URL itself was changed: %s", u)
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
