package delivery

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// TestCallbackQueryStaysOutOfErrors: a callback whose query carries a
// secret fails to answer; neither the log nor the error kept with the
// subscription (shown by the admin API and the status page) repeats it.
func TestCallbackQueryStaysOutOfErrors(t *testing.T) {
	var logs bytes.Buffer
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
	time.Sleep(50 * time.Millisecond)
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the log repeats the callback's query:\n%s", logs.String())
	}
}
