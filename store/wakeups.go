package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/jackc/pgx/v5"

	"github.com/pingd/pingd/internal/reconnect"
)

// Wakeups carries "this node has work" between the pingd processes that
// share a PostgreSQL database, with LISTEN/NOTIFY: a process that appended
// to a node's log announces the node, and the others wake their own
// dispatcher and delivery workers at once instead of at their next poll.
// It is an optimisation only: every worker also polls the database once a
// second, so an announcement lost with a connection delays work by at most
// that second. On SQLite (one process) it does nothing.
//
// The channel is named after a hash of the schema, so installations in
// different schemas of one database do not wake each other. A payload is
// "ORIGIN ID,ID,…" or "ORIGIN *" (every node); a process ignores its own.
type Wakeups struct {
	s      *sqlStore
	origin string

	mu      sync.Mutex
	pending map[int64]struct{}
	all     bool
	signal  chan struct{}
}

// Wakeups returns this process's end of the wake-up channel; make one per
// process and Run it.
func (s *sqlStore) Wakeups() *Wakeups {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &Wakeups{
		s:       s,
		origin:  hex.EncodeToString(b),
		pending: map[int64]struct{}{},
		signal:  make(chan struct{}, 1),
	}
}

// Wake announces to the other processes that the node has work (0: look
// at every node). It never blocks; announcements made in quick succession
// go out together. It makes Wakeups a hub.Transport.
func (w *Wakeups) Wake(nodeID int64) {
	if w.s.backend != backendPostgres {
		return
	}
	w.mu.Lock()
	if nodeID == 0 {
		w.all = true
	} else if len(w.pending) < maxPendingWakeups {
		w.pending[nodeID] = struct{}{}
	} else {
		w.all = true // too many to name: "look at everything" says it all
	}
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// Limits of the channel. PostgreSQL caps a payload below 8000 bytes.
const (
	maxPendingWakeups = 10000
	maxWakeupPayload  = 7900
	wakeupTimeout     = 5 * time.Second
)

// Run sends this process's announcements and calls deliver with the node
// ids the others announce (0: look at every node, also given after the
// listening session was re-established, since announcements may have been
// missed meanwhile) until ctx ends. deliver must not block. On SQLite it
// returns nil at once.
func (w *Wakeups) Run(ctx context.Context, deliver func(nodeID int64)) error {
	if w.s.backend != backendPostgres {
		return nil
	}
	schema, err := w.schema(ctx)
	if err != nil {
		return err
	}
	channel := wakeupChannel(schema)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { w.sendLoop(ctx, channel) })
	w.listenLoop(ctx, channel, deliver)
	return nil
}

// schema asks the pool which schema its connections work in, retrying
// until the database answers or ctx ends.
func (w *Wakeups) schema(ctx context.Context) (string, error) {
	op := func() (string, error) {
		var schema string
		err := w.s.queryRow(ctx, w.s.read, `SELECT current_schema()`, nil, &schema)
		return schema, err
	}
	schema, err := backoff.Retry(ctx, op, backoff.WithBackOff(wakeupPolicy.Backoff()), backoff.WithMaxElapsedTime(0))
	if err != nil {
		return "", fmt.Errorf("wake-ups: %w", err)
	}
	return schema, nil
}

// wakeupPolicy paces the retries of the listening session and of the
// first query: a session that lasted a minute starts them from 200ms again.
var wakeupPolicy = reconnect.Policy{Min: 200 * time.Millisecond, Max: 10 * time.Second, StableAfter: time.Minute}

// wakeupChannel names the channel of the installation in schema.
func wakeupChannel(schema string) string {
	h := fnv.New32a()
	h.Write([]byte(schema))
	return fmt.Sprintf("pingd_wake_%08x", h.Sum32())
}

func (w *Wakeups) take() (all bool, ids []int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	all, w.all = w.all, false
	for id := range w.pending {
		ids = append(ids, id)
	}
	clear(w.pending)
	return all, ids
}

func (w *Wakeups) sendLoop(ctx context.Context, channel string) {
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.signal:
		}
		all, ids := w.take()
		var err error
		for _, payload := range wakeupPayloads(w.origin, all, ids) {
			if _, err = w.s.exec(ctx, w.s.write, `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
				break
			}
		}
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			// The others still find the work at their next poll.
			w.s.log.Warn("wake-ups to other pingd processes are failing; they fall back to polling", "err", err)
			failing = true
		case err == nil && failing:
			w.s.log.Info("wake-ups to other pingd processes work again")
			failing = false
		}
	}
}

// wakeupPayloads splits an announcement into payloads PostgreSQL accepts.
func wakeupPayloads(origin string, all bool, ids []int64) []string {
	if all {
		return []string{origin + " *"}
	}
	slices.Sort(ids)
	var out []string
	var b strings.Builder
	for _, id := range ids {
		s := strconv.FormatInt(id, 10)
		if b.Len() > 0 && b.Len()+1+len(s) > maxWakeupPayload {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() == 0 {
			b.WriteString(origin)
			b.WriteByte(' ')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(s)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// errBadWakeup is returned for payloads not in the wake-up format.
var errBadWakeup = errors.New("malformed wake-up payload")

// parseWakeup reads a payload: who sent it, and the node ids it names
// (all: every node). Node ids are positive.
func parseWakeup(payload string) (origin string, all bool, ids []int64, err error) {
	if len(payload) > 8000 {
		return "", false, nil, fmt.Errorf("%w: %d bytes", errBadWakeup, len(payload))
	}
	origin, rest, ok := strings.Cut(payload, " ")
	if !ok || origin == "" || rest == "" {
		return "", false, nil, fmt.Errorf("%w: %q", errBadWakeup, payload)
	}
	if rest == "*" {
		return origin, true, nil, nil
	}
	for field := range strings.SplitSeq(rest, ",") {
		id, err := strconv.ParseInt(field, 10, 64)
		if err != nil || id <= 0 {
			return "", false, nil, fmt.Errorf("%w: node id %q", errBadWakeup, field)
		}
		ids = append(ids, id)
	}
	return origin, false, ids, nil
}

// listenLoop keeps a LISTEN session open, re-establishing it with backoff,
// and hands what the others announce to deliver.
func (w *Wakeups) listenLoop(ctx context.Context, channel string, deliver func(int64)) {
	var err error
	reconnect.Loop(ctx, wakeupPolicy, func(ctx context.Context) bool {
		err = w.listen(ctx, channel, deliver)
		return true
	}, func(wait time.Duration) {
		w.s.log.Warn("listening for wake-ups from other pingd processes failed; they fall back to polling meanwhile",
			"retry_in", wait, "err", err)
	})
}

// listen runs one LISTEN session until it fails or ctx ends.
func (w *Wakeups) listen(ctx context.Context, channel string, deliver func(int64)) error {
	cfg := w.s.pgConfig.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = "pingd wake-ups " + w.origin
	cctx, cancel := context.WithTimeout(ctx, wakeupTimeout)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		cancel()
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(cctx, "LISTEN "+pgx.Identifier{channel}.Sanitize())
	cancel()
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// Whatever was announced while no session listened is looked for now.
	deliver(0)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		origin, all, ids, err := parseWakeup(n.Payload)
		if err != nil {
			w.s.log.Warn("ignoring a wake-up", "channel", channel, "err", err)
			continue
		}
		if origin == w.origin {
			continue
		}
		if all {
			deliver(0)
			continue
		}
		for _, id := range ids {
			deliver(id)
		}
	}
}
