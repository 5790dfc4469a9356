package testenv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
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

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// for a server a test starts later (Prosody, ejabberd, pingd itself).
//
// It is picked below the kernel's ephemeral range: a port from that range
// may meanwhile become the local end of any outgoing connection of a test
// running in parallel, and the server's bind then fails or, worse, a
// readiness probe reaches the wrong listener. Ports are not handed out
// twice by one test binary.
func FreePort(t testing.TB) int {
	t.Helper()
	low, high := freePortRange()
	for range 200 {
		port := low + rand.IntN(high-low)
		if !claimPort(port) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		return port
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

var (
	portsMu     sync.Mutex
	portsHanded = map[int]bool{}
)

func claimPort(port int) bool {
	portsMu.Lock()
	defer portsMu.Unlock()
	if portsHanded[port] {
		return false
	}
	portsHanded[port] = true
	return true
}

// freePortRange is the span of ports below the ephemeral range (Linux
// default 32768–60999); 20000 up to its start.
func freePortRange() (low, high int) {
	low, high = 20000, 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return low, high
	}
	var first, last int
	if _, err := fmt.Sscan(string(b), &first, &last); err != nil {
		return low, high
	}
	switch {
	case first-low >= 2000:
		return low, first
	case last < 60000:
		return last + 1, 65000
	}
	return low, high
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
	probes := []struct{ addr, ns, to string }{
		{p.C2SAddr, "jabber:client", p.Domain},
		{p.ComponentAddr, "jabber:component:accept", p.ComponentDomain},
	}
	for _, probe := range probes {
		for {
			err := probeStream(probe.addr, probe.ns, probe.to)
			if err == nil {
				break
			}
			if strings.Contains(p.Log(), "Failed to open server port") || time.Now().After(deadline) {
				p.t.Fatalf("prosody did not serve %s on %s: %v\n%s\n%s", probe.ns, probe.addr, err, out.String(), p.Log())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// probeStream opens an XMPP stream to addr and checks that an XMPP server
// answers with a stream header of its own: a port that merely accepts
// could belong to another test's listener.
func probeStream(addr, ns, to string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	header := fmt.Sprintf("<?xml version='1.0'?><stream:stream to='%s' xmlns='%s' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>", to, ns)
	if _, err := c.Write([]byte(header)); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	var got []byte
	for !bytes.Contains(got, []byte("stream:stream")) {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return fmt.Errorf("no XMPP stream header from %s (read %q): %w", addr, got, err)
		}
	}
	_, _ = c.Write([]byte("</stream:stream>"))
	return nil
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
