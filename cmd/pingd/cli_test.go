package main

import (
	"bytes"
	"encoding/json"
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
	out, code = cli("node", "list", "--json")
	var list struct {
		Nodes []map[string]any `json:"nodes"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Nodes) != 1 || list.Nodes[0]["name"] != "cli/demo" {
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
	if out, code = cli("status"); code != 0 || !strings.Contains(out, "XMPP component (readyz)  ok") {
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
