package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Copying an installation from SQLite to PostgreSQL (pingd migrate-db).
// The source is read in one read transaction, a consistent snapshot even
// while a pingd keeps writing to it; the target is written in one
// transaction with COPY, so a copy that fails leaves nothing behind. The
// columns are taken from the databases themselves and converted by the
// target column's type, so a new column needs no change here; a new table
// must be added to copyTables (the copy refuses tables it does not know).

// copyTables are pingd's tables in an order that satisfies their foreign
// keys. schema_migrations is not copied: the target was migrated by Open.
var copyTables = []string{
	"sources", "source_bodies", "seen", "nodes", "events", "items", "node_deletions",
	"subscriptions", "xmpp_subscription_state", "affiliations", "pings", "counters", "upstreams", "relays",
}

// ErrTargetNotEmpty is returned by Copy when the target holds data and
// CopyOptions.Force is not set.
var ErrTargetNotEmpty = errors.New("the target database is not empty")

// CopyOptions tune Copy.
type CopyOptions struct {
	// Force replaces whatever the target holds.
	Force bool
	// Options are used to open both databases.
	Options
}

// TableCount is the number of rows of one table.
type TableCount struct {
	Table string
	Rows  int64
}

// CopyReport says what Copy did.
type CopyReport struct {
	SchemaVersion int
	// Tables are the rows copied per table, in copy order; each was checked
	// against the source snapshot and counted again in the target.
	Tables []TableCount
	// Replaced is true when the target held data that Force replaced.
	Replaced bool
	Took     time.Duration
}

// Copy copies a pingd database from an SQLite file (from: "sqlite:PATH",
// "file:PATH" or a path) into a PostgreSQL database (to: "postgres://…"),
// which it migrates first. The target must be empty unless opt.Force. The
// source must be at this pingd's schema version; it is only read.
func Copy(ctx context.Context, from, to string, opt CopyOptions) (*CopyReport, error) {
	began := time.Now()
	opt.setDefaults()
	src, err := parseDSN(from)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if src.backend != backendSQLite {
		return nil, fmt.Errorf("source %s: copying is from an SQLite file (sqlite:PATH)", redactURL(from))
	}
	dst, err := parseDSN(to)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	if dst.backend != backendPostgres {
		return nil, fmt.Errorf("target %q: copying is to PostgreSQL (postgres://…)", to)
	}
	if fi, err := os.Stat(src.location); err != nil {
		return nil, fmt.Errorf("source %q: %w", src.location, err)
	} else if fi.IsDir() {
		return nil, fmt.Errorf("source %q is a directory", src.location)
	}
	in, err := connectSQLite(ctx, src.location, src.params, opt.Options)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	defer in.Close()
	out, err := openPostgres(ctx, dst.location, opt.Options)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	defer out.Close()
	c := &copier{in: in, out: out.(*sqlStore), log: opt.Logger, shownTarget: redactURL(to), sourcePath: src.location}
	report, err := c.run(ctx, opt.Force)
	if err != nil {
		return nil, err
	}
	report.Took = time.Since(began)
	return report, nil
}

type copier struct {
	in, out     *sqlStore
	log         *slog.Logger
	shownTarget string
	sourcePath  string
}

func (c *copier) run(ctx context.Context, force bool) (*CopyReport, error) {
	version, err := c.checkSchemas(ctx)
	if err != nil {
		return nil, err
	}
	// The snapshot: every count and every row below comes from one read
	// transaction of the source.
	snap, err := c.in.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("source: begin a read transaction: %w", err)
	}
	defer snap.Rollback()
	want, err := countRows(ctx, snap, "source")
	if err != nil {
		return nil, err
	}
	have, err := countRows(ctx, c.out.read, "target")
	if err != nil {
		return nil, err
	}
	occupied := occupiedTables(ctx, c.out, have)
	if len(occupied) > 0 && !force {
		return nil, fmt.Errorf("%w: %s holds %s; pass --force to replace its contents",
			ErrTargetNotEmpty, c.shownTarget, strings.Join(occupied, ", "))
	}

	conn, err := pgx.ConnectConfig(ctx, c.out.pgConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("target: connect: %w", err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("target: begin: %w", err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "TRUNCATE "+identList(copyTables)); err != nil {
		return nil, fmt.Errorf("target: empty the tables: %w", err)
	}
	report := &CopyReport{SchemaVersion: version, Replaced: len(occupied) > 0}
	for _, table := range copyTables {
		n, err := c.copyTable(ctx, snap, tx, table)
		if err != nil {
			return nil, err
		}
		if n != want[table] {
			return nil, fmt.Errorf("table %s: copied %d rows, the source has %d", table, n, want[table])
		}
		report.Tables = append(report.Tables, TableCount{Table: table, Rows: n})
	}
	if err := resetIdentities(ctx, tx); err != nil {
		return nil, err
	}
	copied, err := countRows(ctx, pgxQuerier{tx}, "target")
	if err != nil {
		return nil, err
	}
	if err := compareCounts(want, copied, "before commit"); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("target: commit: %w", err)
	}
	// Counted once more by another connection, after the commit.
	after, err := countRows(ctx, c.out.read, "target")
	if err != nil {
		return nil, err
	}
	if err := compareCounts(want, after, "after commit"); err != nil {
		return nil, err
	}
	return report, nil
}

// checkSchemas makes sure both databases are at this pingd's schema
// version and hold exactly the tables it knows how to copy.
func (c *copier) checkSchemas(ctx context.Context) (int, error) {
	ms, err := migrationsFor(backendSQLite)
	if err != nil {
		return 0, err
	}
	latest := len(ms)
	var version int
	err = c.in.queryRow(ctx, c.in.read, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`, nil, &version)
	if err != nil {
		return 0, fmt.Errorf("source %q is not a pingd database (no schema_migrations table): %w", c.sourcePath, err)
	}
	switch {
	case version > latest:
		return 0, fmt.Errorf("source %q: schema version %d, this pingd knows up to %d: use the pingd that wrote it",
			c.sourcePath, version, latest)
	case version < latest:
		return 0, fmt.Errorf("source %q: schema version %d, this pingd is at %d: start this pingd on it once "+
			"(it migrates at start), then copy", c.sourcePath, version, latest)
	}
	var target int
	if err := c.out.queryRow(ctx, c.out.read, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`, nil, &target); err != nil {
		return 0, fmt.Errorf("target: schema version: %w", err)
	}
	if target != version {
		return 0, fmt.Errorf("target: schema version %d, the source is at %d", target, version)
	}
	srcTables, err := tableNames(ctx, c.in.read, `SELECT name FROM sqlite_master WHERE type = 'table'
		AND name NOT LIKE 'sqlite\_%' ESCAPE '\' AND name <> 'schema_migrations'`)
	if err != nil {
		return 0, fmt.Errorf("source: list tables: %w", err)
	}
	dstTables, err := tableNames(ctx, c.out.read, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name <> 'schema_migrations'`)
	if err != nil {
		return 0, fmt.Errorf("target: list tables: %w", err)
	}
	known := slices.Sorted(slices.Values(copyTables))
	if !slices.Equal(srcTables, known) {
		return 0, fmt.Errorf("source: tables %v, this pingd copies %v", srcTables, known)
	}
	if !slices.Equal(dstTables, known) {
		return 0, fmt.Errorf("target: tables %v, this pingd copies %v (is it another application's schema?)", dstTables, known)
	}
	return version, nil
}

func tableNames(ctx context.Context, db *sql.DB, query string) ([]string, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out, rows.Err()
}

// rowQuerier is what countRows needs of a database, transaction or pgx
// transaction.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// pgxQuerier lets countRows read through a pgx transaction.
type pgxQuerier struct{ tx pgx.Tx }

func (p pgxQuerier) count(ctx context.Context, query string) (int64, error) {
	var n int64
	err := p.tx.QueryRow(ctx, query).Scan(&n)
	return n, err
}

func countRows(ctx context.Context, q any, side string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, table := range copyTables {
		query := "SELECT COUNT(*) FROM " + pgx.Identifier{table}.Sanitize()
		var n int64
		var err error
		switch q := q.(type) {
		case rowQuerier:
			err = q.QueryRowContext(ctx, query).Scan(&n)
		case pgxQuerier:
			n, err = q.count(ctx, query)
		default:
			err = fmt.Errorf("cannot count through %T", q)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: count %s: %w", side, table, err)
		}
		out[table] = n
	}
	return out, nil
}

// occupiedTables lists the tables of the target that hold something; the
// counters a fresh migration writes, all zero, do not count.
func occupiedTables(ctx context.Context, s *sqlStore, counts map[string]int64) []string {
	var out []string
	for _, table := range copyTables {
		n := counts[table]
		if table == "counters" && n > 0 {
			var nonZero int64
			if err := s.queryRow(ctx, s.read, `SELECT COUNT(*) FROM counters WHERE value <> 0`, nil, &nonZero); err == nil && nonZero == 0 {
				continue
			}
		}
		if n > 0 {
			out = append(out, fmt.Sprintf("%d rows in %s", n, table))
		}
	}
	return out
}

func compareCounts(want, got map[string]int64, when string) error {
	var bad []string
	for _, table := range copyTables {
		if want[table] != got[table] {
			bad = append(bad, fmt.Sprintf("%s: %d rows, the source has %d", table, got[table], want[table]))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("row counts differ %s: %s", when, strings.Join(bad, "; "))
	}
	return nil
}

func identList(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = pgx.Identifier{n}.Sanitize()
	}
	return strings.Join(quoted, ", ")
}

// copyTable streams one table from the snapshot into the target with COPY.
func (c *copier) copyTable(ctx context.Context, snap *sql.Tx, tx pgx.Tx, table string) (int64, error) {
	began := time.Now()
	types, err := targetColumns(ctx, tx, table)
	if err != nil {
		return 0, err
	}
	rows, err := snap.QueryContext(ctx, "SELECT * FROM "+pgx.Identifier{table}.Sanitize())
	if err != nil {
		return 0, fmt.Errorf("source: read %s: %w", table, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return 0, fmt.Errorf("source: columns of %s: %w", table, err)
	}
	kinds := make([]string, len(cols))
	for i, col := range cols {
		k, ok := types[col]
		if !ok {
			return 0, fmt.Errorf("table %s: the source has a column %s the target lacks", table, col)
		}
		kinds[i] = k
		delete(types, col)
	}
	if len(types) > 0 {
		return 0, fmt.Errorf("table %s: the target has columns the source lacks: %v", table, slices.Sorted(func(yield func(string) bool) {
			for k := range types {
				if !yield(k) {
					return
				}
			}
		}))
	}
	source := &rowSource{rows: rows, table: table, cols: cols, kinds: kinds}
	n, err := tx.CopyFrom(ctx, pgx.Identifier{table}, cols, source)
	if err != nil {
		return 0, fmt.Errorf("copy %s: %w", table, err)
	}
	c.log.InfoContext(ctx, "table copied", "table", table, "rows", n, "took", time.Since(began).Round(time.Millisecond))
	return n, nil
}

// resetIdentities moves every identity column's sequence past the largest
// copied value, so rows added later get fresh ids.
func resetIdentities(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND is_identity = 'YES'`)
	if err != nil {
		return fmt.Errorf("target: find identity columns: %w", err)
	}
	type col struct{ table, column string }
	var cols []col
	for rows.Next() {
		var c col
		if err := rows.Scan(&c.table, &c.column); err != nil {
			rows.Close()
			return err
		}
		cols = append(cols, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("target: find identity columns: %w", err)
	}
	for _, c := range cols {
		table, column := pgx.Identifier{c.table}.Sanitize(), pgx.Identifier{c.column}.Sanitize()
		query := `SELECT setval(pg_get_serial_sequence($1, $2), COALESCE((SELECT MAX(` + column + `) FROM ` + table + `), 0) + 1, false)`
		if _, err := tx.Exec(ctx, query, table, c.column); err != nil {
			return fmt.Errorf("target: reset the sequence of %s.%s: %w", c.table, c.column, err)
		}
	}
	return nil
}
