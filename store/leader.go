package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Leader locks let one of several pingd processes sharing a database do
// what only one may do at a time (hold the XMPP component on a server that
// takes one connection per name, send the notifications). They are held by
// the database, not by a table row, so the holder's death frees them at
// once instead of after a lease:
//
//   - PostgreSQL: a session-level advisory lock taken on a connection of
//     its own, outside the pool. When the process dies, its connection
//     closes and the server drops the lock. The holder checks its session
//     every second and reports the lock lost as soon as the session is.
//   - SQLite: an exclusive flock on a file beside the database
//     ("pingd.db-NAME.lock"). SQLite serves one pingd process: the lock
//     keeps a second one off the file. The kernel drops it when the
//     holder dies.

// ErrLeaderHeld is returned by TryLeader when another process holds the lock.
var ErrLeaderHeld = errors.New("held by another pingd process")

// Leader is a held leader lock. Release it when done; Lost is closed when
// the database no longer vouches for it (PostgreSQL: the session died), and
// the holder must then stop doing what the lock guards.
type Leader struct {
	name     string
	lost     chan struct{}
	lostOnce sync.Once
	done     chan struct{}
	once     sync.Once
	release  func()
	set      *sessionSet
	// vouched counts the checks that found the lock still held
	// (PostgreSQL), so that tests see the checks pass instead of waiting
	// for them.
	vouched atomic.Int64
}

func newLeader(name string, set *sessionSet, release func()) *Leader {
	l := &Leader{name: name, lost: make(chan struct{}), done: make(chan struct{}), release: release, set: set}
	set.add(l)
	return l
}

// Name is the name the lock was taken under.
func (l *Leader) Name() string { return l.name }

// Lost is closed when the lock is no longer held: after Release, when the
// database session holding it ended, or when the store was closed.
func (l *Leader) Lost() <-chan struct{} { return l.lost }

// Release gives the lock up; it may be called more than once.
func (l *Leader) Release() {
	l.once.Do(func() {
		close(l.done)
		l.release()
		l.markLost()
		l.set.remove(l)
	})
}

func (l *Leader) markLost() { l.lostOnce.Do(func() { close(l.lost) }) }

// sessionSet tracks what must be released when the store closes.
type sessionSet struct {
	mu    sync.Mutex
	items map[interface{ Release() }]struct{}
}

func (s *sessionSet) add(r interface{ Release() }) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.items == nil {
		s.items = map[interface{ Release() }]struct{}{}
	}
	s.items[r] = struct{}{}
}

func (s *sessionSet) remove(r interface{ Release() }) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.items, r)
}

func (s *sessionSet) closeAll() {
	s.mu.Lock()
	items := make([]interface{ Release() }, 0, len(s.items))
	for r := range s.items {
		items = append(items, r)
	}
	s.mu.Unlock()
	for _, r := range items {
		r.Release()
	}
}

// validLeaderName keeps names printable and short: they become part of a
// file name on SQLite and of log lines everywhere.
func validLeaderName(name string) error {
	if name == "" || len(name) > 200 {
		return fmt.Errorf("leader lock name %q: want 1 to 200 characters", name)
	}
	for _, r := range name {
		if r < 0x21 || r > 0x7e {
			return fmt.Errorf("leader lock name %q: only printable ASCII without spaces", name)
		}
	}
	return nil
}

// TryLeader takes the named leader lock if no other process holds it, and
// returns ErrLeaderHeld if one does. It does not wait.
func (s *sqlStore) TryLeader(ctx context.Context, name string) (*Leader, error) {
	if err := validLeaderName(name); err != nil {
		return nil, err
	}
	if s.backend == backendPostgres {
		return s.tryPostgresLeader(ctx, name)
	}
	return s.trySQLiteLeader(name)
}

// leaderLockClass is the first key of pingd's two-key advisory locks; the
// second is a hash of the schema and the lock name, so installations in
// different schemas of one database do not exclude each other. Two-key
// locks live apart from the one-key lock that serialises migrations.
const leaderLockClass = 0x70696e67 // "ping"

// Timing of the PostgreSQL leader session.
const (
	leaderCheckEvery   = time.Second
	leaderCheckTimeout = 3 * time.Second
)

func (s *sqlStore) tryPostgresLeader(ctx context.Context, name string) (*Leader, error) {
	sess, err := s.leaderSession(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("leader lock %q: %w", name, err)
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var got bool
	if err := sess.conn.QueryRow(cctx, `SELECT pg_try_advisory_lock($1, $2)`, leaderLockClass, sess.key).Scan(&got); err != nil {
		sess.conn.Close(context.Background())
		return nil, fmt.Errorf("leader lock %q: %w", name, err)
	}
	if !got {
		// A standby asks again every second or so: it keeps its session
		// for that instead of connecting each time.
		s.spares.put(name, sess)
		return nil, fmt.Errorf("leader lock %q: %w", name, ErrLeaderHeld)
	}
	conn, key := sess.conn, sess.key
	var stopped sync.WaitGroup
	l := newLeader(name, &s.sessions, func() {
		stopped.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		defer cancel()
		// Closing the session frees the lock too; unlocking first says so
		// at once even if the close is slow.
		_, _ = conn.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, leaderLockClass, key)
		_ = conn.Close(ctx)
	})
	stopped.Go(func() { s.watchLeader(l, conn, key) })
	return l, nil
}

// leaderSession is a connection of its own for one leader lock, with the
// lock's key.
type leaderSession struct {
	conn *pgx.Conn
	key  int32
}

// leaderSession returns the session kept from the last attempt at name if
// it still answers, or a new one.
func (s *sqlStore) leaderSession(ctx context.Context, name string) (leaderSession, error) {
	if sess, ok := s.spares.take(name); ok {
		pctx, cancel := context.WithTimeout(ctx, s.timeout)
		err := sess.conn.Ping(pctx)
		cancel()
		if err == nil {
			return sess, nil
		}
		sess.conn.Close(context.Background())
	}
	cfg := s.pgConfig.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = "pingd leader " + name
	// The server notices a vanished holder (power loss, a cut network)
	// within seconds instead of the system's two hours of TCP keepalive.
	cfg.RuntimeParams["tcp_keepalives_idle"] = "5"
	cfg.RuntimeParams["tcp_keepalives_interval"] = "2"
	cfg.RuntimeParams["tcp_keepalives_count"] = "3"
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return leaderSession{}, fmt.Errorf("connect: %w", err)
	}
	var schema string
	if err := conn.QueryRow(cctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		conn.Close(context.Background())
		return leaderSession{}, err
	}
	return leaderSession{conn: conn, key: leaderKey(schema, name)}, nil
}

// spareSessions keeps the sessions of standbys between their attempts.
type spareSessions struct {
	mu     sync.Mutex
	byName map[string]leaderSession
}

func (p *spareSessions) put(name string, sess leaderSession) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byName == nil {
		p.byName = map[string]leaderSession{}
	}
	if old, ok := p.byName[name]; ok {
		old.conn.Close(context.Background())
	}
	p.byName[name] = sess
}

func (p *spareSessions) take(name string) (leaderSession, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sess, ok := p.byName[name]
	delete(p.byName, name)
	return sess, ok
}

func (p *spareSessions) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, sess := range p.byName {
		sess.conn.Close(context.Background())
		delete(p.byName, name)
	}
}

// watchLeader checks once a second that the session still holds the lock
// and marks it lost when it does not answer or no longer does.
func (s *sqlStore) watchLeader(l *Leader, conn *pgx.Conn, key int32) {
	t := time.NewTicker(leaderCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), leaderCheckTimeout)
		var held bool
		err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'
			AND pid = pg_backend_pid() AND classid = $1 AND objid = $2 AND objsubid = 2 AND granted)`,
			uint32(leaderLockClass), uint32(key)).Scan(&held)
		cancel()
		if err == nil && held {
			l.vouched.Add(1)
			continue
		}
		select {
		case <-l.done:
			return // released meanwhile: nothing was lost
		default:
		}
		if err != nil {
			s.log.Warn("leader lock lost: its database session failed", "lock", l.name, "err", err)
		} else {
			s.log.Warn("leader lock lost: the database no longer holds it", "lock", l.name)
		}
		l.markLost()
		// The session is of no more use; closing it makes sure the lock is
		// gone for the others too.
		_ = conn.Close(context.Background())
		return
	}
}

// leaderKey is the second key of the advisory lock for name in schema.
func leaderKey(schema, name string) int32 {
	h := fnv.New32a()
	h.Write([]byte(schema))
	h.Write([]byte{0})
	h.Write([]byte(name))
	return int32(h.Sum32())
}
