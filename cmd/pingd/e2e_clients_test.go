package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// The conformance tests check pingd from outside with clients nobody on
// the project wrote: slixmpp, python-openid's Yadis discovery, Python's
// xmlrpc.client and http.server, feedparser and the curl binary, each
// against the external contract as written. docs/conformance.md lists
// what is checked with which client. Each test function starts one
// Prosody and one pingd and runs several checks in them.

// systemPython is Debian's interpreter: the python3-* packages the clients
// come from install there, not into another python3 first on PATH.
const systemPython = "/usr/bin/python3"

// requirePython skips, naming the Debian package, when a module a client
// script needs is missing, or fails under PINGD_INTEGRATION=require (make
// test installs them).
func requirePython(t *testing.T, modules map[string]string) {
	t.Helper()
	for module, pkg := range modules {
		if out, err := exec.Command(systemPython, "-c", "import "+module).CombinedOutput(); err != nil {
			testenv.Missing(t, "%s cannot import %s (apt-get install -y %s): %v\n%s", systemPython, module, pkg, err, out)
		}
	}
}

// runClient runs a client script of testdata/clients with its arguments
// and returns what it printed on stdout; its stderr is logged.
func runClient(t *testing.T, limit time.Duration, script string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, systemPython, append([]string{filepath.Join("testdata", "clients", script)}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if stderr.Len() > 0 {
		t.Logf("%s stderr:\n%s", script, stderr.String())
	}
	if err != nil {
		t.Fatalf("%s %v: %v\nstdout:\n%s", script, args, err, stdout.String())
	}
	return stdout.Bytes()
}

// runClientReport runs a client script that takes a JSON configuration
// file and prints a JSON report of what it saw, one entry per step.
func runClientReport(t *testing.T, limit time.Duration, script string, cfg any) map[string]json.RawMessage {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out := runClient(t, limit, script, path)
	var report map[string]json.RawMessage
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("%s printed no JSON report: %v\n%s", script, err, out)
	}
	return report
}

// clientsEnv is one Prosody and one pingd with an open node "news" and a
// whitelist node "private", both following feeds of one test server whose
// items a client adds through a control URL.
type clientsEnv struct {
	p    *testenv.Prosody
	d    *daemon
	feed *feedServer
	// newsFeed and privateFeed are the nodes' sources.
	newsFeed, privateFeed string
	// control takes POST guid=…&title=… and adds that item to the feed.
	control string
	// privateToken is the whitelist node's token.
	privateToken string
}

func startClientsEnv(t *testing.T, users ...string) *clientsEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test with outside clients")
	}
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	for _, u := range users {
		p.Register(u, "pw")
	}
	e := &clientsEnv{p: p, feed: newFeedServer(t, feedItem{"old-1", "Old one"})}
	e.newsFeed, e.privateFeed = e.feed.URL+"/news.xml", e.feed.URL+"/private.xml"
	control := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.FormValue("guid") == "" {
			http.Error(w, "POST guid and title", http.StatusBadRequest)
			return
		}
		e.feed.Add(feedItem{r.FormValue("guid"), r.FormValue("title")})
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(control.Close)
	e.control = control.URL + "/add"

	e.d = newDaemon(t, p)
	e.d.Start(true)
	if code := e.d.api("POST", "/api/nodes", map[string]string{"node": "news", "source": e.newsFeed, "title": "News"}, nil); code != 201 {
		t.Fatalf("create news: HTTP %d", code)
	}
	var created struct {
		Token string `json:"token"`
	}
	if code := e.d.api("POST", "/api/nodes", map[string]string{"node": "private", "source": e.privateFeed, "title": "Private", "access_model": "whitelist"}, &created); code != 201 || created.Token == "" {
		t.Fatalf("create private: HTTP %d %+v", code, created)
	}
	e.privateToken = created.Token
	e.d.waitBaselined("news", "private")
	return e
}

// field decodes one entry of a client's report; a step that failed in
// the client ({"error": …}) fails the test with the client's reason.
func field[T any](t *testing.T, report map[string]json.RawMessage, name string) (T, bool) {
	t.Helper()
	var v T
	raw, ok := report[name]
	if !ok {
		t.Errorf("%s: the client did not get to this step", name)
		return v, false
	}
	var failed struct {
		Error   string          `json:"error"`
		Trace   string          `json:"trace"`
		IQError json.RawMessage `json:"iq_error"`
	}
	if json.Unmarshal(raw, &failed) == nil && failed.Error != "" {
		t.Errorf("%s: the client failed: %s\n%s", name, failed.Error, failed.Trace)
		return v, false
	}
	// An XMPP error answer where a result was expected.
	if _, wantError := any(v).(slixError); !wantError && len(failed.IQError) > 0 {
		t.Errorf("%s: error answer %s", name, failed.IQError)
		return v, false
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Errorf("%s: unexpected answer %s (%v)", name, raw, err)
		return v, false
	}
	return v, true
}

func hasAll(haystack string, needles ...string) bool {
	for _, n := range needles {
		if !strings.Contains(haystack, n) {
			return false
		}
	}
	return true
}
