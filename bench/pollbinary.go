package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// binaryPoll is one round of pingd serve, the real binary in a process of
// its own, polling every source of the database the in-process rounds
// used: the memory figure the goal asks for, which the in-process rounds
// cannot tell apart from the origin farm sharing their process.
type binaryPoll struct {
	Due   int
	Polls int64 // requests the origins saw from it
	// FirstAfter is how long after the sources' due time its first
	// request came, Elapsed from then to its last.
	FirstAfter, Elapsed time.Duration
	CPU                 time.Duration // the binary's own CPU over the round
	// StartRSS is its resident memory once started and idle, PeakRSS the
	// most it held (VmHWM, since its start), EndRSS what it held after
	// the round.
	StartRSS, PeakRSS, EndRSS int64
	// Err says why the round did not run ("" when it did).
	Err string
}

// measureBinaryPoll starts pingd serve on db (no pingd may have it open
// but through store.Open in this process), makes every source due at once
// and waits until the origins have seen a request for each. The binary's
// XMPP component has no server to connect to: polling does not need one.
func measureBinaryPoll(ctx context.Context, t testing.TB, bin, db string, farm *originFarm, ids []int64, limit time.Duration) binaryPoll {
	t.Helper()
	res := binaryPoll{Due: len(ids)}
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cmd := exec.Command(bin, "serve")
	cmd.Env = pollServeEnv(t, db, httpAddr)
	proc, err := startProcess(cmd)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer proc.stop()
	pid := proc.pid()
	hc := &http.Client{Timeout: 5 * time.Second}
	if err := proc.waitHealthy(hc, httpAddr, time.Minute, 100*time.Millisecond); err != nil {
		res.Err = err.Error()
		return res
	}
	time.Sleep(time.Second) // started and idle
	if m, err := readMemory(pid); err == nil {
		res.StartRSS = m.RSS
	}

	st, err := store.Open(ctx, db, store.Options{})
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer st.Close()
	// Due a little ahead, all at one time, as the in-process rounds do,
	// the counters read first.
	requests := farm.requests[sidePingd].Load()
	cpu := processCPU([]int{pid})
	// Due more than its loop's tick ahead, as a source's next poll is due
	// long after the poll that set it: nothing wakes the loop (as nothing
	// wakes it for a due poll in production), it learns of the due time
	// on a tick (NextSourceDue) and sleeps until then. The rate is taken
	// from the first request to the last, how late the first came
	// reported apart.
	dueAt := makeDueAhead(ctx, t, st, ids, 1500*time.Millisecond, "pingd serve polling")
	target := requests + int64(len(ids))
	var first time.Time
	last, lastAt := requests, time.Now()
	for deadline := dueAt.Add(limit); ctx.Err() == nil && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		c := farm.requests[sidePingd].Load()
		if c != last {
			last, lastAt = c, time.Now()
			if first.IsZero() {
				first = lastAt
			}
		}
		if c >= target || time.Since(lastAt) > 30*time.Second {
			break
		}
	}
	res.Polls = last - requests
	if !first.IsZero() {
		res.FirstAfter, res.Elapsed = first.Sub(dueAt), lastAt.Sub(first)
	}
	res.CPU = processCPU([]int{pid}) - cpu
	if m, err := readMemory(pid); err == nil {
		res.EndRSS, res.PeakRSS = m.RSS, m.Peak
	}
	return res
}

// pollServeEnv is the environment of a pingd serve that polls the origin
// farm as the in-process side does: its database, its HTTP address, an
// XMPP server that is not there, the same fetch limits.
func pollServeEnv(t testing.TB, db, httpAddr string, extra ...string) []string {
	env := append(os.Environ(),
		"PINGD_DB="+db, "PINGD_HTTP_ADDR="+httpAddr, "PINGD_PUBLIC_URL=http://"+httpAddr,
		"PINGD_XMPP_ADDR="+fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), "PINGD_XMPP_SECRET=bench",
		"PINGD_ALLOW_PRIVATE=1", // the origin farm is on loopback
		"PINGD_FETCH_WORKERS="+strconv.Itoa(pollWorkers), "PINGD_FETCHES_PER_HOST="+strconv.Itoa(pollPerHost),
		"PINGD_FETCH_HOST_SPACING="+pollSpacing.String(),
		// Its log at info level, as deployed, to the null device: the
		// component's reconnect attempts would fill the bench's output.
		"PINGD_LOG_LEVEL=info")
	return append(env, extra...)
}
