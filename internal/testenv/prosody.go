package testenv

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Prosody is a private Prosody server run by a test.
type Prosody struct {
	// Domain is the virtual host users live on ("localhost").
	Domain string
	// ComponentDomain is pingd's component JID; Secret its secret.
	ComponentDomain string
	Secret          string
	// RefPubsub is the JID of Prosody's own pubsub component.
	RefPubsub string
	// C2SAddr and ComponentAddr are the loopback listeners.
	C2SAddr       string
	ComponentAddr string
	// Admins are the JIDs in Prosody's admins list (they may create nodes
	// on Prosody's own pubsub).
	Admins []string
	Dir    string
	Config string

	t   testing.TB
	mu  sync.Mutex
	cmd *exec.Cmd
}

// ProsodyOptions adjusts the server a test starts.
type ProsodyOptions struct {
	// Admins are bare JIDs listed as Prosody admins.
	Admins []string
	// ExtraComponents are more external component names with the same secret.
	ExtraComponents []string
	// ExtraHosts are more virtual hosts beside Domain, for users of other
	// domains on the same server (RegisterOn, DialAddr).
	ExtraHosts []string
	// Certificate and Key, PEM files, turn TLS on: c2s then offers
	// STARTTLS with them (clients that insist on it, such as Dino).
	Certificate, Key string
}

// RequireProsody skips in -short mode, and when prosody is missing skips
// or fails as Missing decides.
func RequireProsody(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs a real Prosody (skipped in -short mode)")
	}
	RequireProgram(t, "prosody", "apt-get install -y prosody")
}

// StartProsody writes a private configuration in a temp dir and starts
// Prosody; it is stopped when the test ends.
func StartProsody(t testing.TB, opts ProsodyOptions) *Prosody {
	t.Helper()
	RequireProsody(t)
	dir := t.TempDir()
	p := &Prosody{
		Domain:          "localhost",
		ComponentDomain: "pubsub.localhost",
		Secret:          "test-secret",
		RefPubsub:       "ref.localhost",
		C2SAddr:         fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		ComponentAddr:   fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		Admins:          opts.Admins,
		Dir:             dir,
		Config:          filepath.Join(dir, "prosody.cfg.lua"),
		t:               t,
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.Config, []byte(p.config(opts)), 0o644); err != nil {
		t.Fatal(err)
	}
	p.Start()
	t.Cleanup(p.Stop)
	return p
}

func port(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

func (p *Prosody) config(opts ProsodyOptions) string {
	enabled, disabled := "", `"s2s"; "tls"`
	if opts.Certificate != "" {
		enabled, disabled = `; "tls"`, `"s2s"`
	}
	var b strings.Builder
	fmt.Fprintf(&b, `daemonize = false
run_as_root = true
pidfile = %q
data_path = %q
log = { info = %q }
c2s_ports = { %s }
c2s_interfaces = { "127.0.0.1" }
component_ports = { %s }
component_interfaces = { "127.0.0.1" }
s2s_ports = { }
http_ports = { }
https_ports = { }
modules_enabled = { "roster"; "saslauth"; "disco"; "ping"; "posix"%s }
modules_disabled = { %s }
c2s_require_encryption = false
allow_unencrypted_plain_auth = true
authentication = "internal_plain"
certificates = %q
limits = { c2s = { rate = "100mb/s" }; s2sin = { rate = "100mb/s" } }
`, filepath.Join(p.Dir, "prosody.pid"), filepath.Join(p.Dir, "data"), filepath.Join(p.Dir, "prosody.log"),
		port(p.C2SAddr), port(p.ComponentAddr), enabled, disabled, filepath.Join(p.Dir, "certs"))
	if opts.Certificate != "" {
		fmt.Fprintf(&b, "ssl = { certificate = %q; key = %q }\n", opts.Certificate, opts.Key)
	}
	admins := make([]string, 0, len(opts.Admins))
	for _, a := range opts.Admins {
		admins = append(admins, fmt.Sprintf("%q", a))
	}
	fmt.Fprintf(&b, "admins = { %s }\n", strings.Join(admins, "; "))
	fmt.Fprintf(&b, "VirtualHost %q\n", p.Domain)
	for _, h := range opts.ExtraHosts {
		fmt.Fprintf(&b, "VirtualHost %q\n", h)
	}
	fmt.Fprintf(&b, "Component %q\n  component_secret = %q\n", p.ComponentDomain, p.Secret)
	for _, c := range opts.ExtraComponents {
		fmt.Fprintf(&b, "Component %q\n  component_secret = %q\n", c, p.Secret)
	}
	fmt.Fprintf(&b, "Component %q \"pubsub\"\n", p.RefPubsub)
	return b.String()
}

// Start starts the server (again) and waits until both ports listen.
func (p *Prosody) Start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return
	}
	cmd := exec.Command("prosody", "--config", p.Config)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start prosody: %v", err)
	}
	p.cmd = cmd
	deadline := time.Now().Add(20 * time.Second)
	for _, addr := range []string{p.C2SAddr, p.ComponentAddr} {
		for {
			c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				p.t.Fatalf("prosody did not listen on %s: %v\n%s\n%s", addr, err, out.String(), p.Log())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// Stop stops the server gracefully (SIGTERM, then SIGKILL after 10 s).
func (p *Prosody) Stop() { p.stop(syscall.SIGTERM) }

// Kill kills the server without warning.
func (p *Prosody) Kill() { p.stop(syscall.SIGKILL) }

func (p *Prosody) stop(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	p.cmd = nil
}

// Register creates a user account on the virtual host.
func (p *Prosody) Register(user, password string) string {
	p.t.Helper()
	return p.RegisterOn(user, p.Domain, password)
}

// RegisterOn creates a user account on the given virtual host (Domain or
// one of ProsodyOptions.ExtraHosts).
func (p *Prosody) RegisterOn(user, host, password string) string {
	p.t.Helper()
	out, err := exec.Command("prosodyctl", "--config", p.Config, "register", user, host, password).CombinedOutput()
	if err != nil {
		p.t.Fatalf("register %s@%s: %v\n%s", user, host, err, out)
	}
	return user + "@" + host
}

// Log returns Prosody's log so far (for failure messages).
func (p *Prosody) Log() string {
	b, _ := os.ReadFile(filepath.Join(p.Dir, "prosody.log"))
	return string(b)
}
