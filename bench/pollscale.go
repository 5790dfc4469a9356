package bench

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// followedResult is pingd serve following N sources filled synthetically.
type followedResult struct {
	N, Hosts int
	Fill     time.Duration // writing the sources and nodes
	DBBytes  int64
	// Healthy is from the process's start to /healthz answering 200;
	// FirstPoll to the origins' first request from it (a source due at
	// its start).
	Healthy, FirstPoll time.Duration
	// IdleRSS is VmRSS once healthy, PeakRSS VmHWM at the end, EndRSS
	// VmRSS at the end.
	IdleRSS, PeakRSS, EndRSS int64
	// PagesPeakRSS is VmHWM after the pages were read.
	PagesPeakRSS        int64
	Rate                float64       // sources due a second
	Window              time.Duration // due times measured
	Scheduled, Unpolled int
	Late                []time.Duration
	CPU                 time.Duration // pingd serve's over the window
	// Pages are the status page's and admin lists' times, by path.
	Pages []pageTime
	Err   string
}

type pageTime struct {
	Path   string
	Status int
	Bytes  int64
	Took   time.Duration
	// next is the answer's Link rel="next", if any.
	next string
}

// nextLink finds the next page's path in a Link header.
var nextLink = regexp.MustCompile(`<([^>]+)>;\s*rel="next"`)

// fillFollowedSources writes n sources, each followed by a node of its
// own, straight into a migrated SQLite database in a few statements: feed
// i at farm.FeedURL(i), baselined, its validators those the origin
// answers 304 to, due evenly over an hour from due0 (source i at due0 +
// i·hour/n). No baseline fetch is made: the polls that follow are those of
// a pingd that has followed them for a while.
func fillFollowedSources(ctx context.Context, db string, farm *originFarm, n int, due0 time.Time) error {
	st, err := store.Open(ctx, db, store.Options{}) // migrates
	if err != nil {
		return err
	}
	st.Close()
	sdb, err := sql.Open("sqlite", db+"?_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)")
	if err != nil {
		return err
	}
	defer sdb.Close()
	sdb.SetMaxOpenConns(1)
	tx, err := sdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TEMP TABLE farm_hosts (k INTEGER PRIMARY KEY, base TEXT NOT NULL)`); err != nil {
		return err
	}
	for k, h := range farm.hosts {
		if _, err := tx.ExecContext(ctx, `INSERT INTO farm_hosts VALUES (?, ?)`, k, h); err != nil {
			return err
		}
	}
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z") // the store's layout
	startUS := due0.UnixMicro()
	// next_fetch_at in the store's layout (to the microsecond, UTC).
	dueExpr := `strftime('%Y-%m-%dT%H:%M:%S', (?1 + g.i * ?2 / ?3) / 1000000, 'unixepoch') || '.' || printf('%06d', (?1 + g.i * ?2 / ?3) % 1000000) || 'Z'`
	_, err = tx.ExecContext(ctx, `WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g WHERE i + 1 < ?3)
		INSERT INTO sources (id, original_url, url, etag, last_modified, is_feed, title, baselined, last_fetch_at, last_status,
			unchanged, next_fetch_at, next_fetch_reason, created_at)
		SELECT g.i + 1, h.base || '/feeds/' || g.i || '.xml', h.base || '/feeds/' || g.i || '.xml',
			'"f' || g.i || '-v' || ?4 || '"', ?5, 1, 'Origin feed ' || g.i, 1, ?6, 304, 1, `+dueExpr+`, 'bench', ?6
		FROM g JOIN farm_hosts h ON h.k = g.i % ?7`,
		startUS, time.Hour.Microseconds(), n, originEntries-1, originLastModified(originEntries-1), now, len(farm.hosts))
	if err != nil {
		return fmt.Errorf("fill sources: %w", err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO nodes (name, title, access_model, max_items, deliver_payloads, notification_type,
			source_id, is_implicit, created_at, updated_at)
		SELECT 'poll-' || (id - 1), title, 'open', 10, 1, 'headline', id, 0, ?1, ?1 FROM sources ORDER BY id`, now)
	if err != nil {
		return fmt.Errorf("fill nodes: %w", err)
	}
	return tx.Commit()
}

// measureFollowedSources fills n sources over hosts origin hosts, starts
// pingd serve on them and measures its start, its memory while it polls
// them at their hourly rate for window, how late those polls are, and how
// long the status page and the admin lists take.
func measureFollowedSources(ctx context.Context, t testing.TB, n, hosts int, window time.Duration, keepDir string) followedResult {
	t.Helper()
	res := followedResult{N: n, Hosts: hosts, Window: window, Rate: float64(n) / time.Hour.Seconds()}
	bin := buildPingd(t)
	farm := startOriginFarm(t, hosts, n, 0)
	defer farm.Close()
	dir := keepDir
	if dir == "" {
		dir = t.TempDir()
	}
	db := filepath.Join(dir, fmt.Sprintf("followed-%d.db", n))
	for _, f := range []string{db, db + "-wal", db + "-shm"} {
		_ = os.Remove(f)
	}
	// The sources are due from a minute after the fill begins: past the
	// fill and the start, the first due at once.
	start := time.Now()
	due0 := start.Add(time.Minute + time.Duration(n)*60*time.Microsecond)
	if err := fillFollowedSources(ctx, db, farm, n, due0); err != nil {
		t.Fatalf("fill %d sources: %v", n, err)
	}
	res.Fill = time.Since(start)
	res.DBBytes = fileSize(db) + fileSize(db+"-wal")
	if time.Now().After(due0) {
		res.Err = fmt.Sprintf("the fill took %v, past the first due time", res.Fill.Round(time.Second))
		return res
	}
	// One source due now: the first poll tells when the fetch loop runs.
	if err := setDue(ctx, db, 1, time.Now()); err != nil {
		t.Fatal(err)
	}

	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	const token = "bench-admin-token"
	cmd := exec.Command(bin, "serve")
	cmd.Env = pollServeEnv(t, db, httpAddr, "PINGD_ADMIN_TOKEN="+token)
	requests := farm.requests[sidePingd].Load()
	launched := time.Now()
	proc, err := startProcess(cmd)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer proc.stop()
	pid := proc.pid()
	hc := &http.Client{Timeout: 30 * time.Second}
	if err := proc.waitHealthy(hc, httpAddr, 5*time.Minute, 10*time.Millisecond); err != nil {
		res.Err = err.Error()
		return res
	}
	res.Healthy = time.Since(launched)
	if m, err := readMemory(pid); err == nil {
		res.IdleRSS = m.RSS
	}
	for farm.requests[sidePingd].Load() == requests && time.Since(launched) < 5*time.Minute {
		time.Sleep(5 * time.Millisecond)
	}
	res.FirstPoll = time.Since(launched)

	// Lateness: the sources due within the window, from 10 s after the
	// first due time (those before are the start's).
	step := time.Hour / time.Duration(n)
	from := min(n, int(10*time.Second/step))
	to := min(n, from+int(window/step))
	res.Scheduled = to - from
	farm.resetArrivals(sidePingd)
	cpu := processCPU([]int{pid})
	last := due0.Add(time.Duration(to) * step)
	deadline := last.Add(latenessGrace)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		done := true
		for i := to - 1; i >= from; i -= max(1, (to-from)/64) {
			if farm.feeds[i].firstAt[sidePingd].Load() == 0 {
				done = false
				break
			}
		}
		if done && time.Now().After(last) {
			break
		}
		select {
		case <-proc.exited:
			res.Err = "pingd serve exited while polling"
			return res
		case <-time.After(100 * time.Millisecond):
		}
	}
	res.CPU = processCPU([]int{pid}) - cpu
	end := time.Now()
	for i := from; i < to; i++ {
		due := due0.Add(time.Duration(i) * step).Truncate(time.Microsecond)
		at := farm.feeds[i].firstAt[sidePingd].Load()
		if at == 0 {
			res.Unpolled++
			res.Late = append(res.Late, end.Sub(due))
			continue
		}
		res.Late = append(res.Late, time.Unix(0, at).Sub(due))
	}
	if m, err := readMemory(pid); err == nil {
		res.EndRSS, res.PeakRSS = m.RSS, m.Peak
	}
	// Then the status page, its JSON, the admin node list's first page
	// and the whole list read a page of 1000 at a time.
	res.Pages = append(res.Pages, timePage(ctx, hc, "http://"+httpAddr+"/", token, 0))
	res.Pages = append(res.Pages, timePage(ctx, hc, "http://"+httpAddr+"/api/status", token, 0))
	res.Pages = append(res.Pages, timePage(ctx, hc, "http://"+httpAddr+"/api/nodes", token, 0))
	res.Pages = append(res.Pages, walkPages(ctx, hc, "http://"+httpAddr, "/api/nodes?limit=1000", token))
	if m, err := readMemory(pid); err == nil {
		res.PagesPeakRSS = m.Peak
	}
	return res
}

// setDue makes one source due at at, through the store.
func setDue(ctx context.Context, db string, id int64, at time.Time) error {
	st, err := store.Open(ctx, db, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	return st.ScheduleSource(ctx, id, at, "bench")
}

// timePage times one GET, its body read to the end or to its first limit
// bytes (limit > 0).
func timePage(ctx context.Context, hc *http.Client, url, token string, limit int64) pageTime {
	pt := pageTime{Path: url[len("http://")+len(urlHost(url)):]}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return pt
	}
	req.Header.Set("Authorization", "Bearer "+token)
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		pt.Took = time.Since(start)
		return pt
	}
	defer resp.Body.Close()
	var body io.Reader = resp.Body
	if limit > 0 {
		body = io.LimitReader(body, limit)
	}
	pt.Bytes, _ = io.Copy(io.Discard, body)
	pt.Took, pt.Status = time.Since(start), resp.StatusCode
	if m := nextLink.FindStringSubmatch(resp.Header.Get("Link")); m != nil {
		pt.next = m[1]
	}
	return pt
}

// walkPages times reading a paged list to its end, following each
// answer's Link rel="next"; Path says how many pages it read. An answer
// 429 (the admin API's rate limit) is waited out and asked again, its
// time and the wait not counted.
func walkPages(ctx context.Context, hc *http.Client, base, first, token string) pageTime {
	var total pageTime
	pages, limited := 0, 0
	for path := first; path != "" && ctx.Err() == nil; {
		pt := timePage(ctx, hc, base+path, token, 0)
		if pt.Status == http.StatusTooManyRequests && limited < 10_000 {
			limited++
			time.Sleep(100 * time.Millisecond)
			continue
		}
		pages++
		total.Bytes += pt.Bytes
		total.Took += pt.Took
		total.Status = pt.Status
		if pt.Status != http.StatusOK {
			break
		}
		path = pt.next
	}
	total.Path = fmt.Sprintf("%s, every page (%d; %d answers 429 waited out)", first, pages, limited)
	return total
}

func urlHost(u string) string {
	rest := u[len("http://"):]
	for i, c := range rest {
		if c == '/' {
			return rest[:i]
		}
	}
	return rest
}
