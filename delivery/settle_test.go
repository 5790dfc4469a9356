package delivery

import (
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// settle makes the engine look for work at every node and waits until
// that look is over and what it claimed is done with: whatever it found
// due has been sent by then. Tests that show nothing was due use it where
// a sleep could only hope to have waited long enough.
func (e *Engine) settle(t testing.TB) {
	t.Helper()
	e.poke(0)
	e.mu.Lock()
	want := e.pokes
	e.mu.Unlock()
	testenv.WaitFor(t, 15*time.Second, "the engine's look for work, and what it claimed, to be over", func() bool {
		// looked before held: a look stores looked after counting in
		// held what it claimed.
		return e.looked.Load() >= want && e.held.Load() == 0
	})
}

// Settle is settle, for the tests of package delivery_test.
func (e *Engine) Settle(t testing.TB) { e.settle(t) }
