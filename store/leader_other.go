//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package store

import "fmt"

// trySQLiteLeader needs flock, which this platform lacks.
func (s *sqlStore) trySQLiteLeader(name string) (*Leader, error) {
	return nil, fmt.Errorf("leader lock %q: SQLite leader locks need flock, which this system lacks", name)
}
