package component

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// instance is one pingd process as far as the component can tell: its own
// store handle (its own lock), hub and component, on a database others
// share.
type instance struct {
	env  *env
	stop func()
}

// startInstance opens the shared database again and runs a component
// that asks the store's leader lock for the lease.
func startInstance(t *testing.T, p *testenv.Prosody, dbPath, admin string, logs *logBuffer, name string) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(logs, nil)).With("instance", name)
	h, err := hub.New(hub.Config{Stores: store.HubStores(st), Admins: []string{admin}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	comp, err := New(Config{
		Hub: h, Store: st, Domain: p.ComponentDomain, Addr: p.ComponentAddr, Secret: p.Secret,
		PublicURL: "http://pingd.test", Logger: log,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond,
		Leader:      storeLeader(st, "xmpp:"+p.ComponentDomain),
		LeaderRetry: 200 * time.Millisecond,
		SweepEvery:  200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Register(comp, hub.KindXMPP)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := comp.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			st.Close()
		})
	}
	t.Cleanup(stop)
	return &instance{env: &env{t: t, ctx: context.Background(), p: p, store: st, hub: h, comp: comp, logs: logs, admin: admin, dbPath: dbPath}, stop: stop}
}

// storeLeader adapts the store's leader lock to Config.Leader, as
// cmd/pingd does.
func storeLeader(st store.Store, name string) func(ctx context.Context) (Lease, error) {
	return func(ctx context.Context) (Lease, error) {
		l, err := st.TryLeader(ctx, name)
		if errors.Is(err, store.ErrLeaderHeld) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return l, nil
	}
}

// TestLeaderHandover runs two components on one database against a
// Prosody that takes one connection per name: one leads and connects, the
// other stands by (ready, not connected); items published through the
// standby reach the subscriber through the leader's sweep; when the leader
// stops, the standby takes over and nothing is sent twice.
func TestLeaderHandover(t *testing.T) {
	testenv.RequireProsody(t)
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	admin := p.Register("admin", password)
	p.Register("alice", password)
	logs := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("component logs:\n%s", logs.String())
		}
	})
	dbPath := filepath.Join(t.TempDir(), "pingd.db")
	a := startInstance(t, p, dbPath, admin, logs, "a")
	testenv.WaitFor(t, 20*time.Second, "a to lead and connect", func() bool { return a.env.comp.Connected() && a.env.comp.Leading() })
	b := startInstance(t, p, dbPath, admin, logs, "b")
	testenv.WaitFor(t, 10*time.Second, "b to stand by", b.env.comp.Ready)
	if b.env.comp.Connected() || b.env.comp.Leading() {
		t.Fatal("the standby connected or leads while a holds the lease")
	}
	if !a.env.comp.Ready() {
		t.Fatal("the connected leader is not ready")
	}

	a.env.createNode("news", "", hub.AccessOpen)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a.env.ctx = ctx
	alice := testenv.Dial(ctx, t, p, "alice", password, "r")
	result(t, a.env.request(alice, "set", subscribePayload("news", alice.JID.Bare().String())))

	// Published through the standby: its own component does not send, the
	// leader's sweep finds the node behind.
	b.env.ctx = ctx
	b.env.publish("news", "one")
	if got := collectItems(t, alice, "news", 1); !slices.Equal(got, []receivedItem{{"one", "Title one"}}) {
		t.Fatalf("published through the standby: got %v", got)
	}
	noEvents(t, alice, 600*time.Millisecond)

	// The leader stops; the standby takes over within a few retries.
	began := time.Now()
	a.stop()
	testenv.WaitFor(t, 10*time.Second, "b to take over", func() bool { return b.env.comp.Connected() && b.env.comp.Leading() })
	t.Logf("takeover after %v", time.Since(began).Round(10*time.Millisecond))
	noEvents(t, alice, 500*time.Millisecond) // "one" is not sent again
	b.env.publish("news", "two")
	if got := collectItems(t, alice, "news", 1); !slices.Equal(got, []receivedItem{{"two", "Title two"}}) {
		t.Fatalf("after the takeover: got %v", got)
	}
	noEvents(t, alice, 500*time.Millisecond)
	for _, want := range [][2]string{{"instance=a", "now leads"}, {"instance=b", "standing by"}, {"instance=b", "now leads"}} {
		found := false
		for line := range strings.Lines(logs.String()) {
			found = found || strings.Contains(line, want[0]) && strings.Contains(line, want[1])
		}
		if !found {
			t.Errorf("no log line with %q and %q", want[0], want[1])
		}
	}
}

// fakeLease is a lease that is never lost until released.
type fakeLease struct {
	lost chan struct{}
	once sync.Once
}

func (l *fakeLease) Lost() <-chan struct{} { return l.lost }
func (l *fakeLease) Release()              { l.once.Do(func() { close(l.lost) }) }

// TestReadyWhileTakingOver: a standby that takes the lease while the XMPP
// server still refuses the component's name (it holds the dead leader's
// session) stays ready for HTTP traffic, then, if it still cannot
// connect after the takeover grace, answers not ready like a single
// process that lost its server.
func TestReadyWhileTakingOver(t *testing.T) {
	// A server that takes the connection and closes it at once: every
	// attempt fails, as Prosody's refusals of a name in use do.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "pingd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := hub.New(hub.Config{Stores: store.HubStores(st), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var leasing atomic.Bool // false: another process holds the lease
	comp, err := New(Config{
		Hub: h, Store: st, Domain: "pubsub.localhost", Addr: ln.Addr().String(), Secret: "s",
		PublicURL: "http://pingd.test", Logger: slog.New(slog.DiscardHandler),
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		Leader: func(context.Context) (Lease, error) {
			if !leasing.Load() {
				return nil, nil
			}
			return &fakeLease{lost: make(chan struct{})}, nil
		},
		LeaderRetry: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	const grace = 1500 * time.Millisecond
	comp.takeoverGrace = grace
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = comp.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })

	testenv.WaitFor(t, 5*time.Second, "the standby to be ready", comp.Ready)
	leasing.Store(true) // the leader died: this process takes the lease
	testenv.WaitFor(t, 5*time.Second, "the takeover", comp.Leading)
	took := time.Now()
	// Throughout the grace, though every connection fails, ready.
	for time.Since(took) < grace-300*time.Millisecond {
		if comp.Connected() {
			t.Fatal("connected to a server that closes every connection")
		}
		if !comp.Ready() {
			t.Fatalf("not ready %v after taking the lease, while the XMPP server refuses", time.Since(took).Round(time.Millisecond))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Past it, a leader without its XMPP server is not ready.
	testenv.WaitFor(t, 5*time.Second, "not ready after the grace", func() bool { return !comp.Ready() })
}
