package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"modernc.org/sqlite" // also registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"
)

// openSQLite opens the SQLite file at path with two pools: one connection
// for writes, whose transactions begin IMMEDIATE so that they queue for
// the file lock instead of failing when they upgrade from reading, and a
// few read-only connections that WAL lets read while a write is under way.
func openSQLite(ctx context.Context, path string, params url.Values, opt Options) (Store, error) {
	// Processes opening a fresh file together can find it locked while
	// another turns on WAL, which SQLite reports at once instead of
	// waiting out busy_timeout: try again for as long as a query may take.
	deadline := time.Now().Add(opt.QueryTimeout)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		s, err := openSQLiteOnce(ctx, path, params, opt)
		if err == nil || !isSQLiteBusy(err) || time.Now().Add(wait).After(deadline) {
			return s, err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, err
		}
	}
}

func openSQLiteOnce(ctx context.Context, path string, params url.Values, opt Options) (Store, error) {
	s, err := connectSQLite(ctx, path, params, opt)
	if err != nil {
		return nil, err
	}
	if err := s.migrate(ctx, 0); err != nil {
		s.Close()
		return nil, fmt.Errorf("open database %q: %w", path, err)
	}
	return s, nil
}

// isSQLiteBusy reports SQLITE_BUSY (the database file is locked).
func isSQLiteBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// connectSQLite opens the pools without touching the schema.
func connectSQLite(ctx context.Context, path string, params url.Values, opt Options) (*sqlStore, error) {
	if err := prepareSQLiteFile(path); err != nil {
		return nil, err
	}
	base := "file:" + escapeURIPath(path)
	common := cloneValues(params)
	busy := opt.QueryTimeout.Milliseconds()
	common.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy))
	common.Add("_pragma", "foreign_keys(1)")
	common.Add("_pragma", "journal_mode(WAL)")
	if !setsPragma(params, "synchronous") {
		// A commit writes the WAL without waiting for the disk: it
		// survives a crash of pingd, and the last commits before a power
		// cut may be lost. An operator who wants every answered ping on
		// the disk gives "file:PATH?_pragma=synchronous(FULL)"
		// (docs/operating.md has what it costs).
		common.Add("_pragma", "synchronous(NORMAL)")
	}

	writeParams := cloneValues(common)
	writeParams.Set("_txlock", "immediate")
	write, err := sql.Open("sqlite", base+"?"+writeParams.Encode())
	if err != nil {
		return nil, fmt.Errorf("open database %q: %w", path, err)
	}
	write.SetMaxOpenConns(1)

	readParams := cloneValues(common)
	readParams.Add("_pragma", "query_only(1)")
	read, err := sql.Open("sqlite", base+"?"+readParams.Encode())
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open database %q: %w", path, err)
	}
	readers := max(4, runtime.GOMAXPROCS(0))
	read.SetMaxOpenConns(readers)
	read.SetMaxIdleConns(readers) // each new connection runs the pragmas again
	health, err := sql.Open("sqlite", base+"?"+readParams.Encode())
	if err != nil {
		write.Close()
		read.Close()
		return nil, fmt.Errorf("open database %q: %w", path, err)
	}
	health.SetMaxOpenConns(1)
	health.SetMaxIdleConns(1)

	s := &sqlStore{
		dialect: dialect{
			backend:   backendSQLite,
			timeArg:   sqliteTime,
			retryable: func(error) bool { return false },
		},
		read:       read,
		write:      write,
		health:     health,
		timeout:    opt.QueryTimeout,
		log:        opt.Logger,
		sqlitePath: path,
		closeFn:    func() error { return errors.Join(health.Close(), read.Close(), write.Close()) },
		readStmts:  newStmtCache(read),
		writeStmts: newStmtCache(write),
	}
	s.group = newGroupCommitter(s)
	// The write connection is opened first so that it sets up WAL before
	// a read-only connection looks at the file.
	if err := s.writePing(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open database %q: %w", path, err)
	}
	return s, nil
}

func (s *sqlStore) writePing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.write.PingContext(ctx)
}

// setsPragma reports whether params set the pragma name themselves.
func setsPragma(params url.Values, name string) bool {
	for _, p := range params["_pragma"] {
		if n, _, _ := strings.Cut(p, "("); strings.EqualFold(strings.TrimSpace(n), name) {
			return true
		}
	}
	return false
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// prepareSQLiteFile checks that the database file can be written and
// creates it with mode 0600 (SQLite gives its -wal and -shm files the
// same mode), so that a bad path fails with a clear message.
func prepareSQLiteFile(path string) error {
	dir := filepath.Dir(path)
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("open database %q: it is a directory", path)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("open database %q: file is not writable: %w", path, err)
		}
		f.Close()
		// SQLite writes its journal files next to the database.
		if err := checkWritableDir(dir); err != nil {
			return fmt.Errorf("open database %q: %w", path, err)
		}
		return nil
	}
	if err := checkWritableDir(dir); err != nil {
		return fmt.Errorf("open database %q: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open database %q: %w", path, err)
	}
	return f.Close()
}

// checkWritableDir tries to create a file in dir; permission bits alone do
// not tell (root, ACLs, read-only mounts).
func checkWritableDir(dir string) error {
	f, err := os.CreateTemp(dir, ".pingd-write-check-*")
	if err != nil {
		return fmt.Errorf("directory %q is not writable: %w", dir, unwrapPathError(err))
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// unwrapPathError drops the temporary file name from the message.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// escapeURIPath escapes what SQLite's URI filenames give a meaning to.
func escapeURIPath(path string) string {
	r := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	path = r.Replace(filepath.ToSlash(path))
	if strings.HasPrefix(path, "//") {
		// "file://" would start an authority.
		path = "/" + strings.TrimLeft(path, "/")
	}
	return path
}
