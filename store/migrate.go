package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
)

// The schema of each backend is a numbered series of migrations,
// NNNN_name.sql, applied in order, each in its own transaction, and
// recorded in schema_migrations.
//
//go:embed migrations
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
	// foreignKeysOff: an SQLite migration that rebuilds a table others
	// reference runs with foreign keys off, as SQLite's documented way to
	// change a table's schema requires (with them on, dropping the old
	// table would delete every row referencing it). Its file starts with
	// foreignKeysOffMarker; the references are checked before it commits.
	foreignKeysOff bool
	// data, when set, runs after the SQL in the same transaction: a step
	// that needs Go (dataMigrations).
	data func(ctx context.Context, tx *txn) error
}

// dataMigrations are the steps SQL cannot do, by migration name without
// its number; the SQL file of such a migration says what the step does.
var dataMigrations = map[string]func(ctx context.Context, tx *txn) error{
	"canonical_urls.sql": canonicalizeStoredURLs,
	"callback_hosts.sql": fillCallbackHosts,
	"seen_lists.sql":     moveSeenIntoLists,
}

const foreignKeysOffMarker = "-- pingd: foreign keys off"

// migrationsFor returns the backend's migrations in version order.
func migrationsFor(backend string) ([]migration, error) {
	dir := path.Join("migrations", backend)
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: the name must start with a version number and '_'", e.Name())
		}
		body, err := fs.ReadFile(migrationFiles, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		_, base, _ := strings.Cut(e.Name(), "_")
		out = append(out, migration{version: v, name: e.Name(), sql: string(body),
			foreignKeysOff: strings.HasPrefix(string(body), foreignKeysOffMarker), data: dataMigrations[base]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d", m.name, i+1)
		}
	}
	return out, nil
}

// migrationLockID keys the PostgreSQL advisory lock that keeps several
// pingd processes starting at once from migrating together.
const migrationLockID = 0x70696e6764 // "pingd"

// migrate brings the schema up to version target (0: the newest), and
// refuses a database recorded as newer than this binary knows.
func (s *sqlStore) migrate(ctx context.Context, target int) error {
	ms, err := migrationsFor(s.backend)
	if err != nil {
		return err
	}
	if target <= 0 || target > len(ms) {
		target = len(ms)
	}
	from, count := -1, 0
	for _, m := range ms[:target] {
		applied := false
		fkOff := m.foreignKeysOff && s.backend == backendSQLite
		if fkOff {
			// The pragma is a no-op inside a transaction, so it is set on
			// the write pool's one connection before; the transaction
			// checks it took.
			if _, err := s.write.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
				return fmt.Errorf("migration %s: switch foreign keys off: %w", m.name, err)
			}
		}
		// Not inOwnTx, whose transaction has a few query timeouts: a
		// data step takes as long as the rows it moves (migration 0026,
		// every source's seen ids: about a minute for a million sources).
		// The SQL of the migration has its own budget below; the data
		// step pages through its rows, each statement bounded by its page.
		err := s.retried(ctx, s.runTx, func(tx *txn) error {
			applied = false
			current, err := s.schemaVersion(ctx, tx)
			if err != nil {
				return err
			}
			if current > len(ms) {
				return fmt.Errorf("schema version %d, this pingd knows up to %d: %w", current, len(ms), hub.ErrSchemaTooNew)
			}
			if current >= m.version {
				return nil
			}
			if current != m.version-1 {
				return fmt.Errorf("schema version %d cannot take migration %s", current, m.name)
			}
			if fkOff {
				var on int
				if err := s.queryRow(ctx, tx, `PRAGMA foreign_keys`, nil, &on); err != nil || on != 0 {
					return fmt.Errorf("migration %s needs foreign keys off and they are not (%d, %v); nothing was changed", m.name, on, err)
				}
			}
			// A migration may take longer than one query: give it its own
			// budget within the transaction.
			mctx, cancel := context.WithTimeout(ctx, 10*s.timeout)
			defer cancel()
			if !onlyComments(m.sql) {
				if _, err := tx.ExecContext(mctx, m.sql); err != nil {
					return fmt.Errorf("apply migration %s: %w", m.name, err)
				}
			}
			if m.data != nil {
				if err := m.data(ctx, tx); err != nil {
					return fmt.Errorf("apply migration %s: %w", m.name, err)
				}
			}
			if fkOff {
				if err := foreignKeyCheck(mctx, tx); err != nil {
					return fmt.Errorf("migration %s: %w", m.name, err)
				}
			}
			if _, err := s.exec(ctx, tx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`,
				m.version, s.timeArg(time.Now())); err != nil {
				return fmt.Errorf("record migration %s: %w", m.name, err)
			}
			applied = true
			return nil
		})
		if fkOff {
			if _, onErr := s.write.ExecContext(ctx, `PRAGMA foreign_keys = ON`); onErr != nil && err == nil {
				err = fmt.Errorf("migration %s: switch foreign keys on again: %w", m.name, onErr)
			}
		}
		if err != nil {
			return err
		}
		if applied {
			// One line per migration is noise on a fresh database (every
			// migration runs); the summary below is the operator's line.
			s.log.DebugContext(ctx, "database migrated", "backend", s.backend, "version", m.version, "migration", m.name)
			if from < 0 {
				from = m.version - 1
			}
			count++
		}
	}
	if count > 0 {
		s.log.InfoContext(ctx, fmt.Sprintf("database at version %d", target), "backend", s.backend,
			"version", target, "migrated_from", from, "migrations", count)
	}
	return nil
}

// foreignKeyCheck fails when any row references a row that does not
// exist (SQLite), naming the first such table.
func foreignKeyCheck(ctx context.Context, tx *txn) error {
	rows, err := tx.QueryContext(ctx, `PRAGMA foreign_key_check`)
	if err != nil {
		return fmt.Errorf("check foreign keys: %w", err)
	}
	defer rows.Close()
	if rows.Next() {
		var table string
		var rowid any
		var parent string
		var fkid int
		if err := rows.Scan(&table, &rowid, &parent, &fkid); err != nil {
			return fmt.Errorf("check foreign keys: %w", err)
		}
		return fmt.Errorf("a row of %s references a missing row of %s", table, parent)
	}
	return rows.Err()
}

// schemaVersion creates schema_migrations if needed and returns the
// newest version recorded there (0 for an empty database). On PostgreSQL
// it first takes a transaction-scoped advisory lock, so concurrent
// starters migrate one after the other.
func (s *sqlStore) schemaVersion(ctx context.Context, tx *txn) (int, error) {
	if s.backend == backendPostgres {
		if _, err := s.exec(ctx, tx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLockID)); err != nil {
			return 0, fmt.Errorf("lock schema: %w", err)
		}
	}
	colType := "TEXT"
	if s.backend == backendPostgres {
		colType = "TIMESTAMPTZ"
	}
	if _, err := s.exec(ctx, tx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, applied_at `+colType+` NOT NULL)`); err != nil {
		return 0, fmt.Errorf("create schema_migrations: %w", err)
	}
	var v int
	if err := s.queryRow(ctx, tx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`, nil, &v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// onlyComments reports whether an SQL text has nothing but "--" comments
// and blank lines: a migration whose work is its data step.
func onlyComments(sql string) bool {
	for line := range strings.SplitSeq(sql, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "--") {
			return false
		}
	}
	return true
}
