package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/pingd/pingd/internal/testenv"
)

// TestAdminCLI drives the admin commands against a running pingd.
func TestAdminCLI(t *testing.T) {
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	d := newDaemon(t, p)
	d.Start(true)
	env := func(k string) string {
		switch k {
		case "PINGD_SERVER":
			return d.URL
		case "PINGD_ADMIN_TOKEN":
			return testAdminToken
		}
		return ""
	}
	cli := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut, env)
		return out.String() + errOut.String(), code
	}

	out, code := cli("node", "create", "cli/demo", "--access", "whitelist", "--title", "CLI demo")
	if code != 0 || !strings.Contains(out, "cli/demo") || !strings.Contains(out, "token") {
		t.Fatalf("node create: exit %d\n%s", code, out)
	}
	if out, code = cli("node", "create", "cli/other"); code != 0 {
		t.Fatalf("node create: exit %d\n%s", code, out)
	}
	// A page of one node: the list follows the pages.
	defer func(n int) { cliNodePage = n }(cliNodePage)
	cliNodePage = 1
	out, code = cli("node", "list", "--json")
	var list struct {
		Nodes []map[string]any `json:"nodes"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Nodes) != 2 || list.Nodes[0]["name"] != "cli/demo" ||
		list.Nodes[1]["name"] != "cli/other" {
		t.Fatalf("node list --json: exit %d\n%s", code, out)
	}
	if out, code = cli("whitelist", "add", "cli/demo", "Someone@Localhost/res"); code != 0 {
		t.Fatalf("whitelist add: exit %d\n%s", code, out)
	}
	out, code = cli("whitelist", "list", "cli/demo")
	if code != 0 || !strings.Contains(out, "someone@localhost") || !strings.Contains(out, "member") {
		t.Fatalf("whitelist list: exit %d\n%s", code, out)
	}
	if out, code = cli("node", "show", "cli/demo"); code != 0 || !strings.Contains(out, "whitelist") {
		t.Fatalf("node show: exit %d\n%s", code, out)
	}
	if out, code = cli("subscribers", "cli/demo"); code != 0 || !strings.Contains(out, "KIND") {
		t.Fatalf("subscribers: exit %d\n%s", code, out)
	}
	if out, code = cli("status"); code != 0 || !strings.Contains(out, "XMPP component (readyz)  ok") ||
		!regexp.MustCompile(`(?m)^nodes +2$`).MatchString(out) {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	if out, code = cli("node", "show", "nope"); code != 1 || !strings.Contains(out, "not found") {
		t.Fatalf("node show of an unknown node: exit %d\n%s", code, out)
	}
	bad := func(k string) string {
		if k == "PINGD_ADMIN_TOKEN" {
			return "wrong"
		}
		return env(k)
	}
	var errOut bytes.Buffer
	if code := run([]string{"node", "list"}, &errOut, &errOut, bad); code != 1 || !strings.Contains(errOut.String(), "refused the token") {
		t.Fatalf("wrong token: exit %d\n%s", code, errOut.String())
	}
	if out, code = cli("node", "delete", "cli/demo"); code != 0 {
		t.Fatalf("node delete: exit %d\n%s", code, out)
	}
}

// TestAdminCLIOperator covers what an operator meets in the first hour:
// help for the node commands, a node changed through PATCH, one clear
// message for an unknown node, and status failing when pingd is away.
func TestAdminCLIOperator(t *testing.T) {
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	d := newDaemon(t, p)
	d.Start(true)
	env := func(k string) string {
		switch k {
		case "PINGD_SERVER":
			return d.URL
		case "PINGD_ADMIN_TOKEN":
			return testAdminToken
		}
		return ""
	}
	cli := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut, env)
		return out.String() + errOut.String(), code
	}

	if out, code := cli("node", "--help"); code != 0 || !strings.Contains(out, "set NAME") || strings.Contains(out, "unknown node command") {
		t.Fatalf("node --help: exit %d\n%s", code, out)
	}
	if out, code := cli("node", "create", "ops/one", "--title", "Before"); code != 0 {
		t.Fatalf("node create: exit %d\n%s", code, out)
	}
	out, code := cli("node", "set", "ops/one", "--title", "After", "--access-model", "whitelist", "--max-items", "7", "--json")
	var n map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &n) != nil {
		t.Fatalf("node set: exit %d\n%s", code, out)
	}
	if n["title"] != "After" || n["access_model"] != "whitelist" || n["max_items"] != float64(7) {
		t.Fatalf("node set answered %v", n)
	}
	// Only the options given change.
	if out, code = cli("node", "set", "ops/one", "--payloads", "false", "--json"); code != 0 || json.Unmarshal([]byte(out), &n) != nil {
		t.Fatalf("node set --payloads: exit %d\n%s", code, out)
	}
	if n["title"] != "After" || n["access_model"] != "whitelist" || n["deliver_payloads"] != false {
		t.Fatalf("node set --payloads changed more: %v", n)
	}
	if out, code = cli("node", "set", "ops/one"); code == 0 {
		t.Fatalf("node set without options: exit 0\n%s", out)
	}
	out, code = cli("node", "show", "nosuch")
	if code != 1 || !strings.Contains(out, `node "nosuch" not found`) || strings.Count(out, "not found") != 1 {
		t.Fatalf("node show nosuch: exit %d\n%s", code, out)
	}
	if out, code = cli("node", "set", "nosuch", "--title", "x"); code != 1 || strings.Count(out, "not found") != 1 {
		t.Fatalf("node set nosuch: exit %d\n%s", code, out)
	}

	away := func(k string) string {
		if k == "PINGD_SERVER" {
			return "http://127.0.0.1:1"
		}
		return env(k)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"status"}, &stdout, &stderr, away); code == 0 || !strings.Contains(stderr.String(), "cannot reach pingd") {
		t.Fatalf("status with pingd away: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
}

// TestCLIHelpAndDiscoverLoopback: --help lists --allow-private, and
// discover names it when it refuses a loopback address.
func TestCLIHelpAndDiscoverLoopback(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--help"}, &out, &errOut, func(string) string { return "" }); code != 0 || !strings.Contains(out.String(), "--allow-private") {
		t.Fatalf("--help: exit %d\n%s", code, out.String())
	}
	for _, cmd := range [][]string{{"node", "--help"}, {"whitelist", "--help"}, {"node", "help"}} {
		out.Reset()
		if code := run(cmd, &out, &errOut, func(string) string { return "" }); code != 0 || !strings.Contains(out.String(), "pingd") {
			t.Errorf("%v: exit %d\n%s", cmd, code, out.String())
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	out.Reset()
	errOut.Reset()
	code := run([]string{"discover", srv.URL + "/"}, &out, &errOut, func(string) string { return "" })
	if code != 1 || !strings.Contains(errOut.String(), "loopback") || !strings.Contains(errOut.String(), "--allow-private") {
		t.Fatalf("discover of a loopback URL: exit %d\n%s", code, errOut.String())
	}
}
