package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// openPostgres connects a pgxpool of opt.MaxConns connections and serves
// the store through database/sql on top of it. Everything that must hold
// across several pingd processes is done with database locks: row locks
// (FOR UPDATE, SKIP LOCKED for claims) and an advisory lock for migrations.
func openPostgres(ctx context.Context, dsn string, opt Options) (Store, error) {
	s, err := connectPostgres(ctx, dsn, opt)
	if err != nil {
		return nil, err
	}
	if err := s.migrate(ctx, 0); err != nil {
		s.Close()
		return nil, fmt.Errorf("open database %q: %w", redactURL(dsn), err)
	}
	return s, nil
}

// connectPostgres connects the pool without touching the schema.
func connectPostgres(ctx context.Context, dsn string, opt Options) (*sqlStore, error) {
	shown := redactURL(dsn)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open database %q: %w", shown, errors.New(redactError(err, dsn)))
	}
	cfg.MaxConns = int32(min(opt.MaxConns, 1<<20))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database %q: %w", shown, err)
	}
	db := stdlib.OpenDBFromPool(pool)
	db.SetMaxOpenConns(opt.MaxConns)
	// Check's own connection, outside the pool (see sqlStore.health).
	health := stdlib.OpenDB(*cfg.ConnConfig.Copy())
	health.SetMaxOpenConns(1)
	health.SetMaxIdleConns(1)
	s := &sqlStore{
		dialect: dialect{
			backend:   backendPostgres,
			rowLocks:  true,
			timeArg:   postgresTime,
			retryable: pgRetryable,
		},
		read:     db,
		write:    db,
		health:   health,
		timeout:  opt.QueryTimeout,
		log:      opt.Logger,
		pgConfig: cfg.ConnConfig.Copy(),
		closeFn: func() error {
			err := errors.Join(health.Close(), db.Close())
			pool.Close()
			return err
		},
	}
	if err := s.writePing(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open database %q: %w", shown, err)
	}
	return s, nil
}

// pgRetryable reports the errors PostgreSQL returns when it aborted a
// transaction that may succeed if run again.
func pgRetryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40001" || pe.Code == "40P01" // serialization_failure, deadlock_detected
	}
	return false
}

// redactURL hides the password of a database URL for messages.
func redactURL(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://…"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// redactError keeps a connection string out of an error message.
func redactError(err error, dsn string) string {
	msg := err.Error()
	if u, perr := url.Parse(dsn); perr == nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
		if pw := u.Query().Get("password"); pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}
