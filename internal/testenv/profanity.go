package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Profanity is the terminal Jabber client Profanity (Debian "profanity")
// run by a test: in a tmux server of its own (its own socket), with a
// private HOME, logged in to a test's XMPP server. A test types into it
// and reads its screen, as its user would.
type Profanity struct {
	t      testing.TB
	dir    string
	socket string
}

// RequireProfanity skips the test when profanity or tmux is missing, or
// fails under PINGD_INTEGRATION=require (make test installs both).
func RequireProfanity(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs Profanity and tmux (skipped in -short mode)")
	}
	for _, bin := range []string{"profanity", "tmux"} {
		RequireProgram(t, bin, "apt-get install -y profanity tmux")
	}
}

// profanitySession is the tmux session Profanity runs in.
const profanitySession = "profanity"

// StartProfanity starts Profanity and logs in as jid with password on
// the c2s address (plain, on loopback); it is stopped when the test ends.
func StartProfanity(t testing.TB, c2sAddr, jid, password string) *Profanity {
	t.Helper()
	RequireProfanity(t)
	// A short path: tmux's socket path must fit in a Unix socket address.
	dir, err := os.MkdirTemp("", "prof-")
	if err != nil {
		t.Fatal(err)
	}
	p := &Profanity{t: t, dir: dir, socket: filepath.Join(dir, "tmux.sock")}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("Profanity's screen at the end:\n%s", p.Screen())
		}
		_ = os.RemoveAll(dir)
	})
	// A wide screen, so that lines are not wrapped where a test looks.
	p.tmux("new-session", "-d", "-s", profanitySession, "-x", "220", "-y", "50",
		"-e", "HOME="+dir, "-e", "LANG=C.UTF-8", "-e", "TERM=xterm-256color",
		"profanity")
	p.WaitFor("Type '/help'", 20*time.Second)
	host, port := hostPort(c2sAddr)
	p.Type(fmt.Sprintf("/connect %s server %s port %s tls disable", jid, host, port))
	p.WaitFor("Enter password", 10*time.Second)
	p.Type(password)
	p.WaitFor("logged in successfully", 20*time.Second)
	return p
}

func hostPort(addr string) (string, string) {
	i := strings.LastIndexByte(addr, ':')
	return addr[:i], addr[i+1:]
}

// tmux runs a tmux command on this Profanity's own tmux server.
func (p *Profanity) tmux(args ...string) string {
	p.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-S", p.socket}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+p.dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		p.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// Type types a line and presses Enter.
func (p *Profanity) Type(line string) {
	p.t.Helper()
	p.tmux("send-keys", "-t", profanitySession, "-l", line)
	p.tmux("send-keys", "-t", profanitySession, "Enter")
}

// Screen is what Profanity's window shows now.
func (p *Profanity) Screen() string {
	cmd := exec.Command("tmux", "-S", p.socket, "capture-pane", "-p", "-J", "-t", profanitySession)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(no screen: %v: %s)", err, out)
	}
	return string(out)
}

// WaitFor waits until the screen shows text and returns the screen.
func (p *Profanity) WaitFor(text string, d time.Duration) string {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for {
		screen := p.Screen()
		if strings.Contains(screen, text) {
			return screen
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("Profanity did not show %q within %s; its screen:\n%s", text, d, screen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop ends Profanity and its tmux server (only this test's).
func (p *Profanity) Stop() {
	_ = exec.Command("tmux", "-S", p.socket, "kill-server").Run()
}
