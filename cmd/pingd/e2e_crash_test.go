package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pingd/pingd/internal/testenv"
)

// TestScalingKillMidFanOut runs two pingd processes on one PostgreSQL
// against Prosody, with a node followed by XMPP subscribers and GetPingd
// webhooks (a quarter of them slow to answer), and kills one process with
// SIGKILL in the middle of a burst's fan-out, then restarts it a few
// seconds later with the same options (so under the same default
// instance name), as a supervisor would: once the leader, and once
// whichever process holds more delivery leases at that moment (the
// processes race for the claims). Nothing may be lost; every subscriber
// must have every entry within 15 s of the kill; no subscriber may get
// more than one batch again (each entry at most twice: the burst is one
// batch for every kind); and the survivor's /readyz must answer 200
// throughout, the takeover of the XMPP component included.
func TestScalingKillMidFanOut(t *testing.T) {
	t.Run("kill the leader", func(t *testing.T) { testKillMidFanOut(t, true) })
	t.Run("kill the process delivering", func(t *testing.T) { testKillMidFanOut(t, false) })
}

func testKillMidFanOut(t *testing.T, killLeader bool) {
	db := testPostgres(t)
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	const (
		readers  = 10
		hooks    = 40
		slowEach = 4 // every fourth webhook receiver is slow
		slowFor  = 2 * time.Second
		burstLen = 50
	)
	var names []string
	for i := range readers {
		names = append(names, p.Register(fmt.Sprintf("reader%d", i), "pw"))
	}
	feed := newFeedServer(t, feedItem{"old", "Old"})
	d1 := newInstance(t, prosodyServer(p), db)
	d2 := newInstance(t, prosodyServer(p), db)
	d1.Start(true)
	testenv.WaitFor(t, 10*time.Second, "the first to lead", d1.leads)
	d2.Start(true)
	ds := []*daemon{d1, d2}
	// A process's name in the leases, as its start-up line says.
	instance := func(d *daemon) string {
		name := ""
		for line := range strings.Lines(d.logs.String()) {
			if _, rest, ok := strings.Cut(line, `msg="pingd starting"`); ok {
				_, name, _ = strings.Cut(rest, " instance=")
				name, _, _ = strings.Cut(strings.TrimSpace(name), " ")
			}
		}
		if name == "" {
			t.Fatalf("no instance name in the start-up line of %s", d.URL)
		}
		return name
	}
	pg, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close(context.Background()) })
	leasesOf := func(d *daemon) int {
		var n int
		if err := pg.QueryRow(context.Background(), `SELECT COUNT(*) FROM subscriptions
			WHERE lease_owner = $1 AND lease_until > now()`, instance(d)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if code := d1.api("POST", "/api/nodes", map[string]any{"node": "news", "source": feed.URL, "max_items": 1000}, nil); code != 201 {
		t.Fatalf("create node: HTTP %d", code)
	}
	d1.waitBaselined("news")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	xmppGot := newTally()
	xmppGot.welcomes("old") // the feed's entry at its first fetch
	for i := range readers {
		c := testenv.Dial(ctx, t, p, fmt.Sprintf("reader%d", i), "pw", "r")
		if resp := subscribe(t, ctx, c, p.ComponentDomain, "news"); !strings.Contains(resp, `subscription="subscribed"`) {
			t.Fatalf("subscribe: %s", resp)
		}
		xmppGot.listen(t, c)
	}

	// The webhook receivers: items counted when a request arrives (a
	// process may die before the answer; the receiver has them anyway).
	hookGot := newTally()
	var inFlight atomic.Int64
	receive := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hookGot.receive(w, r) {
			return
		}
		if strings.HasPrefix(r.URL.Path, "/slow/") {
			inFlight.Add(1)
			defer inFlight.Add(-1)
			select {
			case <-time.After(slowFor):
			case <-r.Context().Done():
			}
		}
	})
	// The slow receivers share one host, as the did: the per-host
	// limit queues most of them behind the first few, so when the kill
	// comes some have the burst and the others wait for it.
	fastHost, slowHost := httptest.NewServer(receive), httptest.NewServer(receive)
	t.Cleanup(fastHost.Close)
	t.Cleanup(slowHost.Close)
	var paths []string
	for i := range hooks {
		path := fmt.Sprintf("/fast/%d", i)
		if i%slowEach == 0 {
			path = fmt.Sprintf("/slow/%d", i)
		}
		paths = append(paths, path)
		sink := fastHost
		if strings.HasPrefix(path, "/slow/") {
			sink = slowHost
		}
		d := []*daemon{d1, d2}[i%2]
		body := fmt.Sprintf(`<subscribe><url href="%s%s" method="POST" diff="none"/></subscribe>`, sink.URL, path)
		req, _ := http.NewRequest("POST", d.URL+"/feeds/news?method=subscribe", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/getpingd+http+subscribe+xml")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("subscribe %s: HTTP %d", path, resp.StatusCode)
		}
	}
	testenv.WaitFor(t, 30*time.Second, "every webhook verified", func() bool {
		var list struct {
			Subscribers []map[string]any `json:"subscribers"`
		}
		d1.api("GET", "/api/nodes/news/subscribers", nil, &list)
		active := 0
		for _, s := range list.Subscribers {
			if s["state"] == "active" {
				active++
			}
		}
		return active == hooks+readers // the XMPP subscribers are listed too
	})

	// A warm-up reaches everyone.
	warm := feedItems("warm", 1)
	feed.Add(warm...)
	d2.pingSource(feed.URL)
	testenv.WaitFor(t, 20*time.Second, "the warm-up everywhere", func() bool {
		return xmppGot.complete(names, guids(warm)) && hookGot.complete(paths, guids(warm))
	})

	// Both processes' /readyz, from now until the end; the survivor's
	// answers count.
	var probes, notReady [2]atomic.Int64
	var firstBad [2]atomic.Value
	probeCtx, stopProbes := context.WithCancel(ctx)
	var probing sync.WaitGroup
	for i, d := range ds {
		probing.Go(func() {
			client := &http.Client{Timeout: 2 * time.Second}
			for probeCtx.Err() == nil {
				resp, err := client.Get(d.URL + "/readyz")
				code := 0
				if err == nil {
					code = resp.StatusCode
					resp.Body.Close()
				}
				probes[i].Add(1)
				if code != http.StatusOK {
					notReady[i].Add(1)
					firstBad[i].CompareAndSwap(nil, fmt.Sprintf("%d (%v)", code, err))
				}
				time.Sleep(20 * time.Millisecond) // the probes' pace
			}
		})
	}

	// The burst; the victim is killed once half the fast receivers have
	// it and slow ones are answering.
	burst := feedItems("burst", burstLen)
	feed.Add(burst...)
	d1.pingSource(feed.URL)
	var fast []string
	for _, path := range paths {
		if strings.HasPrefix(path, "/fast/") {
			fast = append(fast, path)
		}
	}
	testenv.WaitFor(t, 20*time.Second, "the fan-out under way", func() bool {
		return inFlight.Load() > 0 && hookGot.complete(fast[:len(fast)/2], guids(burst))
	})
	v := 0 // the leader
	held := [2]int{leasesOf(d1), leasesOf(d2)}
	if !killLeader && held[1] > held[0] {
		v = 1
	}
	victim := ds[v]
	victim.Kill()
	killed := time.Now()
	if !killLeader && held[v] == 0 {
		t.Fatalf("neither process holds a delivery lease mid fan-out: %v", held)
	}
	victimServed := victim.countLog("msg=delivered", "events=50")
	slowAnswering := inFlight.Load()
	waiting := 0
	for _, path := range paths {
		if !hookGot.complete([]string{path}, guids(burst)) {
			waiting++
		}
	}
	// Down a few seconds, as under a supervisor, then restarted under the
	// same name (host and HTTP address).
	time.Sleep(4 * time.Second)
	victim.Start(false)

	testenv.WaitFor(t, 30*time.Second, "every entry at every subscriber", func() bool {
		return xmppGot.complete(names, guids(burst)) && hookGot.complete(paths, guids(burst))
	})
	allIn := time.Since(killed)
	time.Sleep(3 * time.Second) // duplicates, if any, come now
	stopProbes()
	probing.Wait()

	want := append(guids(warm), guids(burst)...)
	xMissing, xRepeated, xExtra := xmppGot.check(names, want)
	hMissing, hRepeated, hExtra := hookGot.check(paths, want)
	t.Logf("killed the %s holding %d delivery leases (the other %d) after it delivered the burst to %d receivers, "+
		"with %d slow deliveries answering and %d webhook receivers still without the burst; every entry everywhere %v after the kill; "+
		"sent again: %d XMPP notifications, %d webhook entries; survivor's /readyz: %d of %d probes not 200",
		map[bool]string{true: "leader", false: "standby"}[v == 0], held[v], held[1-v], victimServed, slowAnswering, waiting,
		allIn.Round(10*time.Millisecond), xExtra, hExtra, notReady[1-v].Load(), probes[1-v].Load())
	if len(xMissing)+len(hMissing) > 0 {
		t.Fatalf("lost: %d XMPP, %d webhook, e.g. %v %v", len(xMissing), len(hMissing),
			xMissing[:min(5, len(xMissing))], hMissing[:min(5, len(hMissing))])
	}
	if allIn > 15*time.Second {
		t.Errorf("every subscriber had every entry %v after the kill, want within 15s", allIn.Round(10*time.Millisecond))
	}
	for _, r := range append(xRepeated, hRepeated...) {
		// "×3" or more: more than one batch sent again.
		if !strings.HasSuffix(r, "×2") {
			t.Errorf("sent more than one batch again: %s", r)
		}
	}
	if n := notReady[1-v].Load(); n > 0 {
		t.Errorf("the survivor's /readyz was not 200 for %d of %d probes, first %v", n, probes[1-v].Load(), firstBad[1-v].Load())
	}
}
