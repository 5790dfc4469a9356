package delivery

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// TestCallbackQueryStaysOutOfErrors: a callback whose query carries a
// secret fails to answer; neither the log nor the error kept with the
// subscription (shown by the admin API and the status page) repeats it.
func TestCallbackQueryStaysOutOfErrors(t *testing.T) {
	var logs syncBuffer
	h := newHarness(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close() // nothing listens: the connection is refused

	const secret = "callback-secret-d41d8cd9"
	id := h.subscribe("http://"+closed+"/hook?token="+secret, hub.SubActive, hub.Options{})
	h.publish("a")
	var sub *hub.Subscription
	testenv.WaitFor(t, 15*time.Second, "the failed delivery", func() bool {
		sub = h.sub(id)
		return sub != nil && sub.ConsecutiveErrors > 0 && sub.LeaseOwner == ""
	})
	if strings.Contains(sub.LastError, secret) || !strings.Contains(sub.LastError, closed) {
		t.Errorf("last error %q: want the address without the query", sub.LastError)
	}
	// The failure is logged before its state is saved, and once the
	// engine has looked for work again nothing more about it is to come.
	h.engine.settle(t)
	out := logs.String()
	if !strings.Contains(out, "delivery failed; will retry") || !strings.Contains(out, closed) {
		t.Errorf("the log does not tell of the failed delivery to %s:\n%s", closed, out)
	}
	if strings.Contains(out, secret) {
		t.Errorf("the log repeats the callback's query:\n%s", out)
	}
}

// syncBuffer is a buffer that the engine's goroutines write to while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
