package store

import (
	"strings"
	"testing"
)

func TestParseDSN(t *testing.T) {
	cases := []struct {
		dsn, backend, location, params string
	}{
		{"pingd.db", backendSQLite, "pingd.db", ""},
		{"/var/lib/pingd/pingd.db", backendSQLite, "/var/lib/pingd/pingd.db", ""},
		{"sqlite:data/pingd.db", backendSQLite, "data/pingd.db", ""},
		{"sqlite:///srv/pingd.db", backendSQLite, "/srv/pingd.db", ""},
		{"SQLITE:x.db", backendSQLite, "x.db", ""},
		{"file:x.db", backendSQLite, "x.db", ""},
		{"file:/srv/x.db?cache=private&_pragma=cache_size(-2000)", backendSQLite, "/srv/x.db", "_pragma=cache_size%28-2000%29&cache=private"},
		{"odd?name.db", backendSQLite, "odd?name.db", ""},
		{"//srv/pingd.db", backendSQLite, "//srv/pingd.db", ""},
		{"postgres://pingd:secret@db.example:5432/pingd?sslmode=require", backendPostgres,
			"postgres://pingd:secret@db.example:5432/pingd?sslmode=require", ""},
		{"postgresql://localhost/pingd", backendPostgres, "postgresql://localhost/pingd", ""},
	}
	for _, c := range cases {
		got, err := parseDSN(c.dsn)
		if err != nil {
			t.Errorf("parseDSN(%q): %v", c.dsn, err)
			continue
		}
		if got.backend != c.backend || got.location != c.location || got.params.Encode() != c.params {
			t.Errorf("parseDSN(%q) = %s %q %q, want %s %q %q", c.dsn, got.backend, got.location, got.params.Encode(),
				c.backend, c.location, c.params)
		}
	}
	for _, bad := range []string{"", "  ", "sqlite:", "file:", "sqlite::memory:", ":memory:", "file://host/x.db", "a\x00b", "file:x.db?%zz"} {
		if got, err := parseDSN(bad); err == nil {
			t.Errorf("parseDSN(%q) = %+v, want an error", bad, got)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("parseDSN(%q) error spans lines: %q", bad, err)
		}
	}
}

func TestRedactURL(t *testing.T) {
	got := redactURL("postgres://pingd:hunter2@db.example/pingd?password=hunter3")
	if strings.Contains(got, "hunter2") || strings.Contains(got, "hunter3") || !strings.Contains(got, "db.example") {
		t.Fatalf("redactURL = %q", got)
	}
}

func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{"pingd.db", "sqlite:x", "file:/a/b?mode=rwc", "postgres://u:p@h/db", "file:///x", ":memory:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		got, err := parseDSN(dsn)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		switch got.backend {
		case backendPostgres:
			if got.location != dsn {
				t.Fatalf("postgres location %q != dsn %q", got.location, dsn)
			}
		case backendSQLite:
			if got.location == "" || strings.ContainsRune(got.location, 0) {
				t.Fatalf("sqlite location %q from %q", got.location, dsn)
			}
			// The path survives the trip through an SQLite URI.
			if escaped := escapeURIPath(got.location); strings.ContainsAny(escaped, "?#") {
				t.Fatalf("escaped path %q keeps URI delimiters", escaped)
			}
		default:
			t.Fatalf("backend %q", got.backend)
		}
	})
}
