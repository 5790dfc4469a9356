package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// Graphical Jabber clients under Xvfb, checked by what the reader sees:
// the text on the screen (tesseract reads a screenshot) and the client's
// own message archive.

// requireGUI skips unless every program is installed (fails instead under
// PINGD_INTEGRATION=require).
func requireGUI(t *testing.T, client string, bins ...string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("integration test: runs %s under Xvfb (skipped in -short mode)", client)
	}
	for _, bin := range bins {
		testenv.RequireProgram(t, bin, "needed to run "+client+"; scripts/test-deps.sh installs it")
	}
}

// guiProcess is a client running under xvfb-run with a private D-Bus, as
// the unprivileged user nobody when the test runs as root (Gajim's data
// then lives in a home of its own).
type guiProcess struct {
	cmd  *exec.Cmd
	home string
	out  string
	logs *syncBuffer
}

func startGUI(t *testing.T, script string, env func(out string) []string) *guiProcess {
	t.Helper()
	home := t.TempDir()
	out := filepath.Join(home, "out")
	if err := os.MkdirAll(filepath.Join(home, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	daemon := "/usr/lib/notification-daemon/notification-daemon"
	inner := fmt.Sprintf(`[ -x %[1]s ] && %[1]s & exec %[2]s`, daemon, script)
	args := []string{"dbus-run-session", "--", "xvfb-run", "-a", "-s", "-screen 0 1280x900x24", "sh", "-c", inner}
	if os.Getuid() == 0 {
		giveToNobody(t, home)
		args = append([]string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8",
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_RUNTIME_DIR=" + filepath.Join(home, "run"),
		"NO_AT_BRIDGE=1", "GTK_A11Y=none",
	}, env(out)...)
	g := &guiProcess{cmd: cmd, home: home, out: out, logs: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = g.logs, g.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(out, "screen.png")); err == nil {
				kept := filepath.Join(os.TempDir(), "pingd-"+t.Name()+"-screen.png")
				if os.WriteFile(kept, b, 0o644) == nil {
					t.Logf("the last screenshot is %s", kept)
				}
			}
			if b, err := os.ReadFile(filepath.Join(out, "status.json")); err == nil {
				t.Logf("client status: %s", b)
			}
			logs := g.logs.String()
			if len(logs) > 8000 {
				logs = "…" + logs[len(logs)-8000:]
			}
			t.Logf("client output:\n%s", logs)
		}
	})
	return g
}

// giveToNobody makes dir (a t.TempDir) the unprivileged user's.
func giveToNobody(t *testing.T, dir string) {
	t.Helper()
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, 65534, 65534)
	}); err != nil {
		t.Fatal(err)
	}
	// t.TempDir's parents are root's 0700 directories.
	for d := filepath.Dir(dir); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		_ = os.Chmod(d, 0o755)
	}
}

// screenText reads the newest screenshot with tesseract.
func (g *guiProcess) screenText() string {
	shot := filepath.Join(g.out, "screen.png")
	if _, err := os.Stat(shot); err != nil {
		return ""
	}
	// Scaled up: tesseract reads a UI's small type better.
	big := filepath.Join(os.TempDir(), fmt.Sprintf("pingd-ocr-%d.png", os.Getpid()))
	defer os.Remove(big)
	if err := exec.Command("convert", shot, "-resize", "200%", big).Run(); err != nil {
		return ""
	}
	out, err := exec.Command("tesseract", big, "-").Output()
	if err != nil {
		return ""
	}
	return string(out)
}

// waitScreen waits until the screen shows every text (spaces collapsed).
func (g *guiProcess) waitScreen(t *testing.T, limit time.Duration, texts ...string) string {
	t.Helper()
	var screen string
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		screen = g.screenText()
		flat := strings.Join(strings.Fields(screen), " ")
		all := true
		for _, s := range texts {
			all = all && strings.Contains(flat, s)
		}
		if all {
			return screen
		}
		time.Sleep(time.Second) // a screenshot and OCR each time: not polled faster
	}
	t.Fatalf("the screen does not show %q; it reads:\n%s", texts, screen)
	return ""
}

// gajimStatus is what the driver reports of Gajim's state.
type gajimStatus struct {
	Step        string   `json:"step"`
	Done        []string `json:"done"`
	Errors      []string `json:"errors"`
	Connected   bool     `json:"connected"`
	PingdOnline bool     `json:"pingd_online"`
	PingdShow   string   `json:"pingd_show"`
}

func (g *guiProcess) gajimStatus() gajimStatus {
	var st gajimStatus
	b, err := os.ReadFile(filepath.Join(g.out, "status.json"))
	if err == nil {
		_ = json.Unmarshal(b, &st)
	}
	return st
}

// archived returns the bodies Gajim's own archive holds from jid.
func (g *guiProcess) archived(t *testing.T, jid string) []string {
	t.Helper()
	path := filepath.Join(g.home, ".local", "share", "gajim", "logs.db")
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(context.Background(),
		`SELECT logs.message FROM logs JOIN jids ON logs.jid_id = jids.jid_id WHERE jids.jid = ? AND logs.message IS NOT NULL`, jid)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var m string
		if rows.Scan(&m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func (g *guiProcess) waitArchived(t *testing.T, jid, text string, limit time.Duration) {
	t.Helper()
	testenv.WaitFor(t, limit, fmt.Sprintf("Gajim's archive to hold %q from %s", text, jid), func() bool {
		for _, m := range g.archived(t, jid) {
			if strings.Contains(m, text) {
				return true
			}
		}
		return false
	})
}

// TestGajimShowsEntries: Gajim 1.7, driven in its own windows as a reader
// would (testdata/clients/gajim_driver.py), against a private Prosody and
// pingd following two feeds.
//   - Discover Services → pingd → node → Subscribe (a plain XEP-0060
//     subscribe; Gajim drops every pubsub event): the node's newest entry
//     and the next new one show in the chat with pingd.
//   - The node page's links: `?roster` adds pingd (Add Contact), and Gajim
//     shows it online; `?message;body=subscribe NODE` opens the chat with
//     the command, which is sent: the answer and the entries show.
//
// What shows is read from the screen (OCR) and from Gajim's archive.
func TestGajimShowsEntries(t *testing.T) {
	requireGUI(t, "Gajim", "gajim", "xvfb-run", "dbus-run-session", "import", "convert", "tesseract")
	testenv.RequireProsody(t)
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	srv := readerServer{name: "prosody", x: prosodyServer(p), c2s: p.C2SAddr, register: p.Register}
	r := newReaderSetup(t, srv)
	news := newFeedServer(t, feedItem{"n-old", "Older news entry"})
	if code := r.d.api("POST", "/api/nodes", map[string]string{"node": "news", "source": news.URL + "/feed.xml", "title": "News"}, nil); code != 201 {
		t.Fatalf("create node: HTTP %d", code)
	}
	r.d.waitBaselined("news")
	jid := p.Register("reader", "pw")

	drv, err := filepath.Abs(filepath.Join("testdata", "clients", "gajim_driver.py"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]string{
		"jid": jid, "password": "pw", "host": "127.0.0.1", "port": strings.TrimPrefix(p.C2SAddr, "127.0.0.1:"),
		"service": p.ComponentDomain, "browse_node": "demo", "chat_node": "news",
	}
	g := startGUI(t, "python3 "+drv, func(out string) []string {
		cfg["out"] = out
		b, _ := json.Marshal(cfg)
		return []string{"PINGD_GAJIM_TEST=" + string(b), "PINGD_GAJIM_VERBOSE=" + os.Getenv("PINGD_GAJIM_VERBOSE")}
	})
	service := p.ComponentDomain
	waitStep := func(step string) {
		t.Helper()
		testenv.WaitFor(t, 30*time.Second, "Gajim to get past "+step, func() bool {
			st := g.gajimStatus()
			if len(st.Errors) > 0 {
				t.Fatalf("the driver failed at %s: %s", st.Step, st.Errors[0])
			}
			for _, d := range st.Done {
				if d == step {
					return true
				}
			}
			return false
		})
	}

	// 1. The service browser's subscription: the newest entry, then a new one.
	waitStep("subscribed_in_browser")
	g.waitArchived(t, service, "An old entry", 15*time.Second)
	r.publish("new-1", "Browser reader news")
	g.waitArchived(t, service, "Browser reader news", 15*time.Second)

	// 2. pingd a contact by the ?roster link, shown online.
	waitStep("add_contact")
	testenv.WaitFor(t, 15*time.Second, "Gajim to show pingd online", func() bool { return g.gajimStatus().PingdOnline })

	// 3. The command by the message link: the answer and the entries.
	waitStep("press_enter")
	g.waitArchived(t, service, `Subscribed to "news"`, 15*time.Second)
	g.waitArchived(t, service, "Older news entry", 15*time.Second)
	news.Add(feedItem{"n-1", "Chat reader headline"})
	r.d.pingSource(news.URL + "/feed.xml")
	g.waitArchived(t, service, "Chat reader headline", 15*time.Second)
	// The chat with pingd is open: the reader sees the newest entry.
	g.waitScreen(t, 20*time.Second, "Chat reader headline")
}
