package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Ejabberd is a private ejabberd node run by a test, the second XMPP server
// pingd is measured and tested against. Besides c2s it has an external
// component listener (several connections under one name share the
// traffic), its own mod_pubsub for comparison and mod_multicast (XEP-0033).
type Ejabberd struct {
	// Domain is the virtual host users live on ("localhost").
	Domain string
	// ComponentDomain is pingd's component JID; Secret its password (every
	// component name of the listener has the same).
	ComponentDomain string
	Secret          string
	// Components are every name the component listener accepts:
	// ComponentDomain and the ExtraComponents. A connection gets the
	// traffic of the name it authenticated as only (global_routes: false);
	// several connections under one name share it.
	Components []string
	// RefPubsub is the JID of ejabberd's own mod_pubsub service.
	RefPubsub string
	// Multicast is the JID of the XEP-0033 service (mod_multicast).
	Multicast string
	// C2SAddr and ComponentAddr are the loopback listeners.
	C2SAddr       string
	ComponentAddr string
	// Admins are the JIDs in ejabberd's admin ACL.
	Admins []string
	// Node is the Erlang node name, unique per server.
	Node   string
	Dir    string
	Config string

	t       testing.TB
	distEnv string // ERL_DIST_PORT: the node's own distribution port, no epmd
	cred    *syscall.Credential
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	out     bytes.Buffer
}

// EjabberdOptions adjusts the server a test starts.
type EjabberdOptions struct {
	// Admins are bare JIDs in ejabberd's admin ACL.
	Admins []string
	// ExtraComponents are more external component names with the same
	// password on the same listener.
	ExtraComponents []string
	// LogLevel is ejabberd's log level; default "info". Benchmarks use
	// "warning" so thousands of logins are not logged one by one.
	LogLevel string
	// Offline loads mod_offline: chat and normal messages to a user who is
	// not logged in are kept and delivered at the next login, as on most
	// servers (Prosody does it without being asked).
	Offline bool
	// ComponentMaxStanzaSize is the component listener's max_stanza_size
	// in bytes; 0 leaves it at 16 MiB.
	ComponentMaxStanzaSize int
}

// ejabberdUser is the system account the Debian package runs ejabberd as;
// its scripts refuse any other user but root, and run as this one.
const ejabberdUser = "ejabberd"

// RequireEjabberd skips in -short mode, and when ejabberd is missing or
// cannot be run by this user skips or fails as Missing decides.
func RequireEjabberd(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs a real ejabberd (skipped in -short mode)")
	}
	RequireProgram(t, "ejabberdctl", "apt-get install -y ejabberd")
	if _, err := ejabberdCredential(); err != nil {
		Missing(t, "%v", err)
	}
}

// ejabberdCredential returns the credential to run ejabberd with: the
// ejabberd account when running as root, nil when already running as it.
func ejabberdCredential() (*syscall.Credential, error) {
	u, err := user.Lookup(ejabberdUser)
	if err != nil {
		return nil, fmt.Errorf("the %q system user is missing (is the ejabberd package installed?): %w", ejabberdUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("uid of %s: %w", ejabberdUser, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("gid of %s: %w", ejabberdUser, err)
	}
	switch os.Geteuid() {
	case int(uid):
		return nil, nil
	case 0:
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("ejabberd runs only as root or as the %q user (this is uid %d)", ejabberdUser, os.Geteuid())
}

// StartEjabberd writes a private configuration in a temp dir owned by the
// ejabberd user and starts a node; it is stopped and the dir removed when
// the test ends.
func StartEjabberd(t testing.TB, opts EjabberdOptions) *Ejabberd {
	t.Helper()
	RequireEjabberd(t)
	cred, err := ejabberdCredential()
	if err != nil {
		t.Fatal(err)
	}
	// t.TempDir is private to this user; ejabberd needs a dir of its own.
	dir, err := os.MkdirTemp("", "pingd-ejabberd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	e := &Ejabberd{
		Domain:          "localhost",
		ComponentDomain: "pubsub.localhost",
		Secret:          "test-secret",
		RefPubsub:       "pubsub-ref.localhost",
		Multicast:       "multicast.localhost",
		C2SAddr:         fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		ComponentAddr:   fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		Admins:          opts.Admins,
		Node:            fmt.Sprintf("pingdtest%d_%s@localhost", os.Getpid(), hex.EncodeToString(suffix)),
		Dir:             dir,
		Config:          filepath.Join(dir, "ejabberd.yml"),
		t:               t,
		distEnv:         strconv.Itoa(FreePort(t)),
		cred:            cred,
	}
	e.Components = append([]string{e.ComponentDomain}, opts.ExtraComponents...)
	files := map[string]string{
		"ejabberd.yml": e.config(opts),
		// The node listens for ejabberdctl on its own loopback port instead
		// of registering with a shared epmd, so nodes stay independent.
		"ejabberdctl.cfg": fmt.Sprintf("ERL_OPTIONS=\"-env ERL_CRASH_DUMP_BYTES 0 -kernel inet_dist_use_interface {127,0,0,1}\"\nERL_DIST_PORT=%s\n", e.distEnv),
		"inetrc":          "{lookup,[\"file\",\"native\"]}.\n{host,{127,0,0,1}, [\"localhost\"]}.\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []string{"db", "log"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if cred != nil {
		err := filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Chown(path, int(cred.Uid), int(cred.Gid))
		})
		if err != nil {
			t.Fatalf("give the ejabberd dir to %s: %v", ejabberdUser, err)
		}
	}
	e.Start()
	t.Cleanup(e.Stop)
	return e
}

func yamlList(items []string) string {
	quoted := make([]string, 0, len(items))
	for _, s := range items {
		quoted = append(quoted, strconv.Quote(s))
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

func (e *Ejabberd) config(opts EjabberdOptions) string {
	level := opts.LogLevel
	if level == "" {
		level = "info"
	}
	var comps strings.Builder
	for _, c := range e.Components {
		fmt.Fprintf(&comps, "      %q:\n        password: %q\n", c, e.Secret)
	}
	admins := "[]"
	if len(opts.Admins) > 0 {
		admins = yamlList(opts.Admins)
	}
	componentMax := opts.ComponentMaxStanzaSize
	if componentMax <= 0 {
		componentMax = 16 << 20
	}
	offline := ""
	if opts.Offline {
		offline = "  mod_offline: {}\n" // the last entry of modules
	}
	// Plain auth without TLS is accepted: no certfiles, starttls not
	// required, passwords stored plainly so SASL PLAIN works. No shapers:
	// a benchmark measures the server, not its rate limits. Without
	// global_routes: false a component would also be routed the traffic of
	// every other name on the listener.
	return fmt.Sprintf(`hosts: [%q]
loglevel: %s
log_rotate_count: 0
hide_sensitive_log_data: false
acme:
  auto: false
auth_method: internal
auth_password_format: plain
listen:
  -
    port: %s
    ip: "127.0.0.1"
    module: ejabberd_c2s
    max_stanza_size: 1048576
    access: c2s
    starttls: false
    starttls_required: false
    backlog: 1024
  -
    port: %s
    ip: "127.0.0.1"
    module: ejabberd_service
    max_stanza_size: %d
    backlog: 1024
    global_routes: false
    hosts:
%sacl:
  admin:
    user: %s
  local:
    user_regexp: ""
access_rules:
  c2s:
    allow: all
  local:
    allow: local
  pubsub_createnode:
    allow: local
api_permissions:
  "console commands":
    from: [ejabberd_ctl]
    who: all
    what: "*"
shaper_rules:
  max_user_sessions: 100000
modules:
  mod_disco: {}
  mod_roster: {}
  mod_ping: {}
  mod_multicast:
    host: %q
    limits:
      local:
        message: infinite
        presence: infinite
      remote:
        message: infinite
        presence: infinite
  mod_pubsub:
    host: %q
    access_createnode: pubsub_createnode
    plugins: [flat]
    max_items_node: 1000
`, e.Domain, level, port(e.C2SAddr), port(e.ComponentAddr), componentMax, comps.String(), admins, e.Multicast, e.RefPubsub) + offline
}

// ctl returns an ejabberdctl command for this node.
func (e *Ejabberd) ctl(args ...string) *exec.Cmd {
	full := append([]string{
		"--config-dir", e.Dir, "--config", e.Config,
		"--spool", filepath.Join(e.Dir, "db"), "--logs", filepath.Join(e.Dir, "log"),
		"--node", e.Node,
	}, args...)
	cmd := exec.Command("ejabberdctl", full...)
	cmd.Dir = e.Dir
	cmd.Env = append(os.Environ(), "HOME="+e.Dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: e.cred}
	return cmd
}

// Start starts the node (again) in the foreground of a child process and
// waits until both listeners accept connections.
func (e *Ejabberd) Start() {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cmd != nil {
		return
	}
	cmd := e.ctl("foreground")
	e.out.Reset()
	cmd.Stdout, cmd.Stderr = &e.out, &e.out
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("start ejabberd: %v", err)
	}
	e.cmd = cmd
	e.exited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(e.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for _, addr := range []string{e.C2SAddr, e.ComponentAddr} {
		for {
			c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-e.exited:
				e.cmd = nil
				e.t.Fatalf("ejabberd exited before listening on %s:\n%s\n%s", addr, e.out.String(), e.Log())
			default:
			}
			if time.Now().After(deadline) {
				e.stopLocked(syscall.SIGKILL)
				e.t.Fatalf("ejabberd did not listen on %s: %v\n%s\n%s", addr, err, e.out.String(), e.Log())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// Stop stops the node gracefully: the Erlang VM takes SIGTERM as an
// orderly shutdown (faster than starting another VM for "ejabberdctl
// stop"). After 15 s it is killed.
func (e *Ejabberd) Stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopLocked(syscall.SIGTERM)
}

// Kill kills the node without warning.
func (e *Ejabberd) Kill() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopLocked(syscall.SIGKILL)
}

// stopLocked signals the VM and its helpers but not the ejabberdctl
// script that leads their process group: the script reaps the VM and
// exits, and we reap the script, so no process is left behind unreaped.
func (e *Ejabberd) stopLocked(sig syscall.Signal) {
	if e.cmd == nil {
		return
	}
	leader := e.cmd.Process.Pid
	for _, pid := range groupMembers(leader) {
		if pid != leader {
			_ = syscall.Kill(pid, sig)
		}
	}
	select {
	case <-e.exited:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-leader, syscall.SIGKILL)
		<-e.exited
	}
	// Nothing of the group may outlive the node.
	_ = syscall.Kill(-leader, syscall.SIGKILL)
	e.cmd = nil
}

// Pids lists the node's processes (the ejabberdctl script, the Erlang VM
// and its helpers), for benchmarks that account the server's CPU time;
// nil when it is not running.
func (e *Ejabberd) Pids() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cmd == nil {
		return nil
	}
	return groupMembers(e.cmd.Process.Pid)
}

// groupMembers lists the processes of a process group (Linux /proc).
func groupMembers(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp …"; comm may contain spaces.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) >= 3 && fields[2] == strconv.Itoa(pgid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Register creates a user account on the virtual host and returns its
// bare JID. Each call starts a short-lived Erlang VM (about half a second).
func (e *Ejabberd) Register(user, password string) string {
	e.t.Helper()
	var lastErr error
	var out []byte
	// Right after start the node may not accept control connections yet.
	for range 20 {
		out, lastErr = e.ctl("register", user, e.Domain, password).CombinedOutput()
		if lastErr == nil {
			return user + "@" + e.Domain
		}
		if bytes.Contains(out, []byte("already registered")) {
			return user + "@" + e.Domain
		}
		time.Sleep(250 * time.Millisecond)
	}
	e.t.Fatalf("register %s: %v\n%s\n%s", user, lastErr, out, e.Log())
	return ""
}

// Dial logs in as user@domain/resource on the node's c2s port; the session
// is closed when the test ends.
func (e *Ejabberd) Dial(ctx context.Context, t testing.TB, user, password, resource string) *Client {
	t.Helper()
	c, err := DialAddr(ctx, e.C2SAddr, user+"@"+e.Domain+"/"+resource, password)
	if err != nil {
		t.Fatalf("dial %s: %v\n%s", user, err, e.Log())
	}
	t.Cleanup(c.Close)
	return c
}

// Log returns ejabberd's logs so far (for failure messages).
func (e *Ejabberd) Log() string {
	var b strings.Builder
	for _, name := range []string{"ejabberd.log", "error.log", "crash.log"} {
		data, err := os.ReadFile(filepath.Join(e.Dir, "log", name))
		if err == nil && len(data) > 0 {
			fmt.Fprintf(&b, "--- %s\n%s", name, data)
		}
	}
	return b.String()
}
