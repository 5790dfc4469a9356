package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// The end-to-end tests run the real pingd binary against a real Prosody,
// real feed servers and real XMPP clients.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain removes the binaries the tests built (one of about 45 MB with
// the race detector per run, which would otherwise pile up in the temp
// directory).
func TestMain(m *testing.M) {
	code := m.Run()
	for _, bin := range []string{binPath, fastPath} {
		if bin != "" {
			_ = os.RemoveAll(filepath.Dir(bin))
		}
	}
	os.Exit(code)
}

func pingdBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pingd-e2e-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "pingd")
		out, err := exec.Command("go", "build", "-race", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// daemon is one pingd process.
type daemon struct {
	t       testing.TB
	env     []string
	URL     string
	dbPath  string
	cmd     *exec.Cmd
	logs    *syncBuffer
	exited  chan struct{}
	stopped bool
}

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

const testAdminToken = "e2e-admin-token"

// newDaemon prepares (does not start) pingd attached to p with its own
// SQLite file; extra are more KEY=value environment entries.
func newDaemon(t testing.TB, p *testenv.Prosody, extra ...string) *daemon {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	d := &daemon{t: t, URL: "http://" + addr, dbPath: filepath.Join(t.TempDir(), "pingd.db")}
	d.env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"PINGD_XMPP_ADDR=" + p.ComponentAddr,
		"PINGD_XMPP_DOMAIN=" + p.ComponentDomain,
		"PINGD_XMPP_SECRET=" + p.Secret,
		"PINGD_HTTP_ADDR=" + addr,
		"PINGD_PUBLIC_URL=" + d.URL,
		"PINGD_DB=" + d.dbPath,
		"PINGD_ADMIN_TOKEN=" + testAdminToken,
		"PINGD_ADMINS=owner@" + p.Domain,
		"PINGD_ALLOW_PRIVATE=1",
		"PINGD_LOG_LEVEL=debug",
	}, extra...)
	t.Cleanup(func() { d.Stop(); d.dumpLogsOnFailure() })
	return d
}

func (d *daemon) dumpLogsOnFailure() {
	if d.t.Failed() && d.logs != nil {
		logs := d.logs.String()
		if len(logs) > 20000 {
			logs = "…" + logs[len(logs)-20000:]
		}
		d.t.Logf("pingd logs:\n%s", logs)
	}
}

// Start runs pingd and waits until /healthz answers (and, if ready, /readyz).
func (d *daemon) Start(waitReady bool) {
	d.t.Helper()
	if d.logs == nil {
		d.logs = &syncBuffer{}
	}
	cmd := exec.Command(pingdBinary(d.t), "serve")
	cmd.Env = d.env
	cmd.Stdout, cmd.Stderr = d.logs, d.logs
	if err := cmd.Start(); err != nil {
		d.t.Fatalf("start pingd: %v", err)
	}
	d.cmd, d.stopped = cmd, false
	d.exited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(d.exited) }()
	path := "/healthz"
	if waitReady {
		path = "/readyz"
	}
	testenv.WaitFor(d.t, 30*time.Second, "pingd "+path, func() bool {
		select {
		case <-d.exited:
			d.t.Fatalf("pingd exited:\n%s", d.logs.String())
		default:
		}
		resp, err := http.Get(d.URL + path)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// Stop ends pingd with SIGTERM and waits for it.
func (d *daemon) Stop() { d.signal(syscall.SIGTERM) }

// Kill ends pingd with SIGKILL.
func (d *daemon) Kill() { d.signal(syscall.SIGKILL) }

func (d *daemon) signal(sig syscall.Signal) {
	if d.cmd == nil || d.stopped {
		return
	}
	d.stopped = true
	_ = d.cmd.Process.Signal(sig)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
		d.t.Errorf("pingd did not stop within 30s of %v", sig)
	}
}

// api calls the admin API and decodes a JSON answer into out (if non-nil).
func (d *daemon) api(method, path string, body any, out any) int {
	d.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, d.URL+path, r)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			d.t.Fatalf("%s %s: %v\n%s", method, path, err, data)
		}
	}
	return resp.StatusCode
}

// sourceStatus is the part of a node's status (GET /api/nodes/{node}/status)
// the tests look at.
type sourceStatus struct {
	LastSeq int64 `json:"last_seq"`
	Source  *struct {
		Baselined bool `json:"baselined"`
	} `json:"source"`
}

// status reads a node's status from the admin API.
func (d *daemon) status(node string) sourceStatus {
	d.t.Helper()
	var st sourceStatus
	if code := d.api("GET", "/api/nodes/"+url.PathEscape(node)+"/status", nil, &st); code != 200 {
		d.t.Fatalf("status of %q: HTTP %d", node, code)
	}
	return st
}

// waitBaselined waits until the status of each node shows its source's
// baseline stored. A feed server's request count does not tell: creating
// a node through the admin API looks at the source once (discovery)
// before the baseline fetch.
func (d *daemon) waitBaselined(nodes ...string) {
	d.t.Helper()
	for _, node := range nodes {
		testenv.WaitFor(d.t, 10*time.Second, "the baseline of "+node, func() bool {
			st := d.status(node)
			return st.Source != nil && st.Source.Baselined
		})
	}
}

// xmlrpc posts an XML-RPC call with string parameters and returns the body.
func (d *daemon) xmlrpc(method string, params ...string) string {
	d.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0"?><methodCall><methodName>%s</methodName><params>`, method)
	for _, p := range params {
		b.WriteString("<param><value><string>")
		_ = xml.EscapeText(&b, []byte(p))
		b.WriteString("</string></value></param>")
	}
	b.WriteString("</params></methodCall>")
	resp, err := http.Post(d.URL+"/RPC2", "text/xml", strings.NewReader(b.String()))
	if err != nil {
		d.t.Fatalf("XML-RPC %s: %v", method, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		d.t.Fatalf("XML-RPC %s: HTTP %d\n%s", method, resp.StatusCode, body)
	}
	return string(body)
}

// feedServer serves an RSS feed whose items a test changes.
type feedServer struct {
	*httptest.Server
	mu    sync.Mutex
	items []feedItem
	hits  int
}

type feedItem struct{ GUID, Title string }

func newFeedServer(t testing.TB, items ...feedItem) *feedServer {
	f := &feedServer{items: items}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.hits++
		w.Header().Set("Content-Type", "application/rss+xml")
		fmt.Fprint(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>Test feed</title><link>http://127.0.0.1/site</link><description>d</description>`)
		for i := len(f.items) - 1; i >= 0; i-- { // newest first
			it := f.items[i]
			fmt.Fprintf(w, `<item><title>%s</title><link>http://127.0.0.1/%s</link><guid isPermaLink="false">%s</guid></item>`, it.Title, it.GUID, it.GUID)
		}
		fmt.Fprint(w, `</channel></rss>`)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *feedServer) Add(items ...feedItem) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items = append(f.items, items...)
}

func (f *feedServer) Hits() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits
}

// pubsubEvent is the part of a notification the tests look at.
type pubsubEvent struct {
	XMLName xml.Name `xml:"message"`
	From    string   `xml:"from,attr"`
	Event   struct {
		Items struct {
			Node  string `xml:"node,attr"`
			Items []struct {
				ID    string `xml:"id,attr"`
				Entry struct {
					Title string `xml:"title"`
				} `xml:"http://www.w3.org/2005/Atom entry"`
			} `xml:"item"`
		} `xml:"items"`
	} `xml:"http://jabber.org/protocol/pubsub#event event"`
}

// receivedItem is one item of one notification.
type receivedItem struct{ Node, ID, Title string }

// collectItems reads notifications until want items arrived or the wait
// ends, and then keeps listening for `quiet` to catch extra ones.
func collectItems(t testing.TB, c *testenv.Client, want int, wait, quiet time.Duration) []receivedItem {
	t.Helper()
	var got []receivedItem
	deadline := time.After(wait)
	var settle <-chan time.Time
	for {
		if len(got) >= want && settle == nil {
			settle = time.After(quiet)
		}
		select {
		case raw := <-c.Stanzas:
			var ev pubsubEvent
			if err := xml.Unmarshal(raw, &ev); err != nil || ev.XMLName.Local != "message" {
				continue
			}
			for _, it := range ev.Event.Items.Items {
				got = append(got, receivedItem{Node: ev.Event.Items.Node, ID: it.ID, Title: it.Entry.Title})
			}
		case <-deadline:
			return got
		case <-settle:
			return got
		}
	}
}

// subscribe sends an XEP-0060 subscribe for the client's bare JID.
func subscribe(t testing.TB, ctx context.Context, c *testenv.Client, component, node string) string {
	t.Helper()
	resp, err := c.SendRaw(ctx, fmt.Sprintf(`<iq type="set" to="%s" id="sub1"><pubsub xmlns="http://jabber.org/protocol/pubsub"><subscribe node="%s" jid="%s"/></pubsub></iq>`,
		component, node, c.JID.Bare().String()))
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	return resp
}

// wantNewestOnSubscribe reads the node's newest item, which a new
// subscription is sent at once (the newest of the feed's entries at its
// first fetch when nothing came since), and checks it is want.
func wantNewestOnSubscribe(t testing.TB, c *testenv.Client, want receivedItem) {
	t.Helper()
	if got := collectItems(t, c, 1, 15*time.Second, 300*time.Millisecond); !slices.Equal(got, []receivedItem{want}) {
		t.Fatalf("sent on subscribing: %v, want %v", got, want)
	}
}
