package main

import (
	"bytes"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// hostileOrigin serves feeds that attack the parser, and one feed that is
// harmless until the test turns it.
type hostileOrigin struct {
	mu     sync.Mutex
	bodies map[string][]byte
	srv    *http.Server
	URL    string
}

const hostileChannel = `<?xml version="1.0"?><rss version="2.0" xmlns:x="urn:x"><channel><title>Hostile</title><link>http://127.0.0.1/</link><description>d</description>`

// hostileBody repeats unit after head up to size bytes and adds tail.
func hostileBody(head, unit, tail string, size int) []byte {
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(head)
	for b.Len()+len(unit)+len(tail) <= size {
		b.WriteString(unit)
	}
	b.WriteString(tail)
	return b.Bytes()
}

func newHostileOrigin(t *testing.T) *hostileOrigin {
	o := &hostileOrigin{bodies: map[string][]byte{
		// The attack that killed pingd: a channel followed by 10 MiB of
		// open elements (within the fetcher's 10 MiB cap) in a namespace
		// of their own, which makes them extension elements, which gofeed
		// parses recursively.
		"/deep": hostileBody(hostileChannel+`<a xmlns="urn:x">`, "<a>", "", 10<<20),
		// Well-formed and a million deep: it took 1.4–2.4 GB to parse.
		"/deep-closed": []byte(hostileChannel + `<a xmlns="urn:x">` + strings.Repeat("<a>", 1_000_000) + strings.Repeat("</a>", 1_000_000) + "</a></channel></rss>"),
		// Shallow and wide: a million sibling extension elements in an item.
		"/wide":  []byte(hostileChannel + "<item><guid>w</guid>" + strings.Repeat("<x:a/>", 1_000_000) + "</item></channel></rss>"),
		"/turns": []byte(hostileChannel + `<item><title>Fine</title><guid>fine-1</guid></item></channel></rss>`),
	}}
	srv := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		body, ok := o.bodies[r.URL.Path]
		o.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/rss+xml")
		_, _ = w.Write(body)
	}))
	o.URL = srv.URL
	return o
}

// turn makes path serve what other serves.
func (o *hostileOrigin) turn(path, other string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.bodies[path] = o.bodies[other]
}

// peakRSS is the peak resident memory of a process (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc status to read memory from: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// sourceState reads the fetch state of a node's source from the admin API.
func (d *daemon) sourceState(node string) (lastError string, lastFetch time.Time, errorsInARow int) {
	d.t.Helper()
	var st struct {
		Source *struct {
			LastError         string    `json:"last_error"`
			LastFetch         time.Time `json:"last_fetch"`
			ConsecutiveErrors int       `json:"consecutive_errors"`
		} `json:"source"`
	}
	if code := d.api("GET", "/api/nodes/"+url.PathEscape(node)+"/status", nil, &st); code != 200 || st.Source == nil {
		d.t.Fatalf("status of %q: HTTP %d", node, code)
	}
	return st.Source.LastError, st.Source.LastFetch, st.Source.ConsecutiveErrors
}

// alive fails the test unless pingd still runs and /healthz answers 200.
func (d *daemon) alive(when string) {
	d.t.Helper()
	select {
	case <-d.exited:
		d.t.Fatalf("pingd died %s:\n%s", when, tail(d.logs.String(), 4000))
	default:
	}
	resp, err := http.Get(d.URL + "/healthz")
	if err != nil {
		d.t.Fatalf("/healthz %s: %v", when, err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		d.t.Fatalf("/healthz %s: HTTP %d", when, resp.StatusCode)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// TestHostileFeedsDoNotCrashPingd attacks the real binary through both
// ways a stranger makes it fetch: an anonymous WebSub subscription naming
// a hostile topic, and a ping of a followed source whose origin turned
// hostile. pingd used to die of a stack overflow in gofeed on the first
// document, and again within seconds of every restart; the deep but
// well-formed one took gigabytes. Now each source is recorded as failed
// with the reason, pingd stays up and healthy with its memory bounded, and
// it stays up after a restart on the same database that fetches the
// sources again.
func TestHostileFeedsDoNotCrashPingd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	// A generous bound: pingd idles at about 30 MB; one of these documents
	// took 1.4–2.4 GB before.
	const memoryBound = 512 << 20
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	d := newDaemon(t, p, "PINGD_LOG_LEVEL=info")
	// The build without the race detector: its memory is production's.
	bin := pingdBinaryFast(t)
	d.startBinary(bin)
	origin := newHostileOrigin(t)
	callback := newRecordingServer(t)

	// A followed source, baselined while harmless.
	turns := origin.URL + "/turns"
	if code := d.api("POST", "/api/nodes", map[string]any{"node": "turns", "source": turns}, nil); code != 201 {
		t.Fatalf("create node: HTTP %d", code)
	}
	calm := newFeedServer(t, feedItem{"calm-1", "Calm one"})
	if code := d.api("POST", "/api/nodes", map[string]any{"node": "calm", "source": calm.URL}, nil); code != 201 {
		t.Fatalf("create node: HTTP %d", code)
	}
	d.waitBaselined("turns", "calm")

	// Anonymous WebSub subscriptions naming hostile topics: pingd creates a
	// node for each and fetches it.
	topics := []string{origin.URL + "/deep", origin.URL + "/deep-closed", origin.URL + "/wide"}
	for _, topic := range topics {
		code, body := postForm(t, d.URL+"/websub", url.Values{"hub.mode": {"subscribe"}, "hub.topic": {topic},
			"hub.callback": {callback.URL + "/cb"}})
		if code != http.StatusAccepted {
			t.Fatalf("WebSub subscribe to %s: HTTP %d %s", topic, code, body)
		}
	}
	// The followed source turns hostile, and a ping makes pingd fetch it.
	origin.turn("/turns", "/deep")
	if code, body := postForm(t, d.URL+"/ping", url.Values{"url": {turns}}); code != 200 {
		t.Fatalf("ping: HTTP %d %s", code, body)
	}

	want := map[string]string{ // node: the refusal its source's status shows
		topics[0]: "nesting depth over the limit of 256",
		topics[1]: "nesting depth over the limit of 256",
		topics[2]: "elements and attributes over the limit of 200000",
		"turns":   "nesting depth over the limit of 256",
	}
	fetched := map[string]time.Time{}
	for node, refusal := range want {
		testenv.WaitFor(t, 60*time.Second, "the refusal of "+node, func() bool {
			d.alive("while fetching hostile feeds")
			lastErr, at, n := d.sourceState(node)
			fetched[node] = at
			return strings.Contains(lastErr, "document refused: "+refusal) && n > 0
		})
	}
	d.alive("after the hostile fetches")
	if rss := peakRSS(t, d.cmd.Process.Pid); rss > memoryBound {
		t.Errorf("pingd's peak memory was %d MiB, bound %d MiB", rss>>20, memoryBound>>20)
	} else {
		t.Logf("pingd's peak memory: %d MiB", rss>>20)
	}
	// The status page shows an admin why.
	req := mustRequest(t, "GET", d.URL+"/?admin=1")
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	if code, page := doRequest(t, req); code != 200 || !strings.Contains(page, "nesting depth over the limit of 256") {
		t.Errorf("status page: HTTP %d without the refusal", code)
	}
	// Nothing else is disturbed: a harmless node publishes on a ping.
	// (Its log already holds the feed's entry at the first fetch.)
	calmSeq := d.status("calm").LastSeq
	calm.Add(feedItem{"calm-2", "Calm two"})
	d.xmlrpc("weblogUpdates.ping", "Calm", calm.URL)
	testenv.WaitFor(t, 30*time.Second, "the harmless node to publish", func() bool { return d.status("calm").LastSeq == calmSeq+1 })

	// A restart on the same database, then pings that fetch every source
	// again (the mended one and the hostile topics).
	d.Stop()
	d.startBinary(bin)
	origin.turn("/turns", "/wide")
	for _, u := range append([]string{turns}, topics...) {
		if code, body := postForm(t, d.URL+"/ping", url.Values{"url": {u}}); code != 200 {
			t.Fatalf("ping %s after the restart: HTTP %d %s", u, code, body)
		}
	}
	want["turns"] = "elements and attributes over the limit of 200000"
	for node, refusal := range want {
		testenv.WaitFor(t, 60*time.Second, "a fetch of "+node+" after the restart", func() bool {
			d.alive("after a restart on the same database")
			lastErr, at, _ := d.sourceState(node)
			return at.After(fetched[node]) && strings.Contains(lastErr, refusal)
		})
	}
	time.Sleep(2 * time.Second) // the crash used to come within seconds
	d.alive("seconds after the restart")
	if rss := peakRSS(t, d.cmd.Process.Pid); rss > memoryBound {
		t.Errorf("after the restart pingd's peak memory was %d MiB, bound %d MiB", rss>>20, memoryBound>>20)
	}
}

func mustRequest(t *testing.T, method, target string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
