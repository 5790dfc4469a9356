//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// trySQLiteLeader takes an exclusive, non-blocking flock on
// "<database>-<name>.lock". flock belongs to the open file, so a second
// open of the same file fails to lock it even in the same process, and
// the kernel drops it when the holder exits in any way.
func (s *sqlStore) trySQLiteLeader(name string) (*Leader, error) {
	path := sqliteLockPath(s.sqlitePath, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("leader lock %q: %w", name, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := readLockHolder(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("leader lock %q (%s%s): %w", name, path, holder, ErrLeaderHeld)
		}
		return nil, fmt.Errorf("leader lock %q (%s): %w", name, path, err)
	}
	// Who holds it, for the message the next one gets.
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "pid %d since %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	}
	return newLeader(name, &s.sessions, func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}), nil
}

// readLockHolder returns ", held by pid N since T" from a lock file, or ""
// when it says nothing useful.
func readLockHolder(f *os.File) string {
	b, err := io.ReadAll(io.LimitReader(f, 200))
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	rest, ok := strings.CutPrefix(line, "pid ")
	if !ok {
		return ""
	}
	pid, since, _ := strings.Cut(rest, " since ")
	if _, err := strconv.Atoi(pid); err != nil {
		return ""
	}
	if _, err := time.Parse(time.RFC3339, since); err != nil {
		return ", held by pid " + pid
	}
	return ", held by pid " + pid + " since " + since
}

// sqliteLockPath is the lock file of name beside the database file.
func sqliteLockPath(dbPath, name string) string {
	var b strings.Builder
	for _, r := range name {
		if r == '/' || r == '\\' || r == ':' {
			r = '_'
		}
		b.WriteRune(r)
	}
	return dbPath + "-" + b.String() + ".lock"
}
