package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

type ingestPlan struct {
	Concurrency []int
	Duration    time.Duration // per side and level
	Rounds      int
	// ProfileDir, when set, gets CPU profiles of pingd's rounds.
	ProfileDir string
	// CommitDelay is pingd's PINGD_PING_COMMIT_DELAY (0: each ping
	// answered after its commit).
	CommitDelay time.Duration
}

func ingestAnswerNote(plan ingestPlan) string {
	if plan.CommitDelay > 0 {
		return fmt.Sprintf("pingd answers once the ping is queued and commits the queue to SQLite within %v (PINGD_PING_COMMIT_DELAY)", plan.CommitDelay)
	}
	return "pingd answers only after the ping is committed to SQLite"
}

type ingestRound struct {
	Conc           int
	Pingd, Limit   float64 // accepted pings per second
	PingdErrors    int64
	Stored, Wanted int64 // pings the store holds after the pingd side, and pings accepted
	// PingdCPU and LimitCPU are this process's CPU time (the side's
	// server and its pingers together) per accepted ping.
	PingdCPU, LimitCPU time.Duration
}

// cannedPingAnswer is what the limit side answers: the same XML-RPC
// response pingd sends, with no work behind it.
const cannedPingAnswer = `<?xml version="1.0"?><methodResponse><params><param><value><struct>` +
	`<member><name>flerror</name><value><boolean>0</boolean></value></member>` +
	`<member><name>message</name><value><string>Thanks for the ping.</string></value></member>` +
	`</struct></value></param></params></methodResponse>`

// startCannedServer is the limit of measurement 4: a net/http handler
// that reads the ping and answers without storing anything.
func startCannedServer(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		w.Header().Set("Content-Type", "text/xml")
		_, _ = io.WriteString(w, cannedPingAnswer)
	})}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("canned server: %v", err)
		}
	}()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/RPC2"
}

// pingLoad sends weblogUpdates.ping calls from conc pingers for d, each
// ping naming a URL of its own (many publishers, none over the per-URL
// rate limit). It returns the pings accepted and refused.
func pingLoad(ctx context.Context, endpoint string, conc int, d time.Duration, tag string) (accepted, refused int64) {
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: conc, IdleConnTimeout: 90 * time.Second},
	}
	defer client.CloseIdleConnections()
	var ok, bad atomic.Int64
	deadline := time.Now().Add(d)
	_ = parallel(conc, conc, func(w int) error {
		for i := 0; time.Now().Before(deadline); i++ {
			body := rpcPing("Bench weblog", fmt.Sprintf("http://blog-%s-%d-%d.bench.example/", tag, w, i))
			if err := postPing(ctx, client, endpoint, body); err != nil {
				bad.Add(1)
				continue
			}
			ok.Add(1)
		}
		return nil
	})
	return ok.Load(), bad.Load()
}

// measureIngest runs measurement 4: pingd's /RPC2 on SQLite against the
// canned handler, alternating, at each concurrency.
func measureIngest(ctx context.Context, t testing.TB, plan ingestPlan) []ingestRound {
	t.Helper()
	p := startPingd(t, pingdOptions{HTTP: true, PingCommitDelay: plan.CommitDelay})
	canned := startCannedServer(t)
	var out []ingestRound
	for _, conc := range plan.Concurrency {
		// Warm-up both sides.
		pingLoad(ctx, p.HTTPURL+"/RPC2", conc, plan.Duration/4, fmt.Sprintf("warm%d", conc))
		pingLoad(ctx, canned, conc, plan.Duration/4, "warm")
		for r := range plan.Rounds {
			res := ingestRound{Conc: conc}
			doPingd := func() {
				since := time.Now().Add(-time.Second)
				_, totalBefore, err := p.Hub.Pings(ctx, since, 1)
				if err != nil {
					t.Fatal(err)
				}
				stop := startProfile(t, plan.ProfileDir, fmt.Sprintf("ingest-c%d-round%d", conc, r))
				cpu, start := selfCPU(), time.Now()
				ok, bad := pingLoad(ctx, p.HTTPURL+"/RPC2", conc, plan.Duration, fmt.Sprintf("c%d-r%d", conc, r))
				res.Pingd = float64(ok) / time.Since(start).Seconds()
				res.PingdCPU = perPing(selfCPU()-cpu, ok)
				res.PingdErrors = bad
				stop()
				_, totalAfter, err := p.Hub.Pings(ctx, since, 1)
				// Queued pings are committed within the delay, once the
				// committer gets to them: wait a while for them.
				for wait := time.Now().Add(2 * time.Second); err == nil && plan.CommitDelay > 0 &&
					totalAfter-totalBefore < ok && time.Now().Before(wait); {
					time.Sleep(plan.CommitDelay)
					_, totalAfter, err = p.Hub.Pings(ctx, since, 1)
				}
				if err != nil {
					t.Fatal(err)
				}
				res.Stored, res.Wanted = totalAfter-totalBefore, ok
			}
			doLimit := func() {
				cpu, start := selfCPU(), time.Now()
				ok, _ := pingLoad(ctx, canned, conc, plan.Duration, "limit")
				res.Limit = float64(ok) / time.Since(start).Seconds()
				res.LimitCPU = perPing(selfCPU()-cpu, ok)
			}
			if r%2 == 0 {
				doPingd()
				doLimit()
			} else {
				doLimit()
				doPingd()
			}
			out = append(out, res)
		}
	}
	return out
}

func perPing(cpu time.Duration, pings int64) time.Duration {
	if pings <= 0 {
		return 0
	}
	return cpu / time.Duration(pings)
}

func ingestTable(rounds []ingestRound, plan ingestPlan) *table {
	t := &table{header: []string{"concurrent pingers", "pingd accepted and stored/s (median)", "canned net/http handler (median)", "pingd ÷ handler", "process CPU per ping: pingd / handler", "refused", "stored / accepted"}}
	for _, c := range plan.Concurrency {
		var pr, lr, pc, lc []float64
		var refused, stored, wanted int64
		for _, r := range rounds {
			if r.Conc == c {
				pr, lr = append(pr, r.Pingd), append(lr, r.Limit)
				pc, lc = append(pc, float64(r.PingdCPU)), append(lc, float64(r.LimitCPU))
				refused += r.PingdErrors
				stored += r.Stored
				wanted += r.Wanted
			}
		}
		t.add(fmt.Sprint(c), perSec(median(pr)), perSec(median(lr)), ratio(median(pr), median(lr)),
			fmt.Sprintf("%s / %s", us(time.Duration(median(pc))), us(time.Duration(median(lc)))), fmt.Sprint(refused), fmt.Sprintf("%d / %d", stored, wanted))
	}
	return t
}
