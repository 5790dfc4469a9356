package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// writeTLS makes a private certificate authority and a certificate for
// "localhost" signed by it: ca, cert and key PEM files in dir.
func writeTLS(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pingd test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER, 0o644), write("localhost.crt", "CERTIFICATE", leafDER, 0o644),
		write("localhost.key", "PRIVATE KEY", keyDER, 0o600)
}

// forwardUnix hands each connection to a Unix socket at path on to addr
// (a Unix socket crosses network namespaces).
func forwardUnix(t *testing.T, path, addr string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); _ = u.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
}

// dinoMessage is one row of Dino's message table.
type dinoMessage struct {
	id, time  int64
	direction int
	body      string
}

// dinoMessages returns Dino's messages with jid, in the order Dino shows
// them (by time, then as stored).
func dinoMessages(t *testing.T, db, jid string) []dinoMessage {
	t.Helper()
	if _, err := os.Stat(db); err != nil {
		return nil
	}
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.QueryContext(context.Background(), `SELECT m.id, m.time, m.direction, COALESCE(m.body, '')
		FROM message m JOIN jid j ON m.counterpart_id = j.id WHERE j.bare_jid = ? ORDER BY m.time, m.id`, jid)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []dinoMessage
	for rows.Next() {
		var m dinoMessage
		if rows.Scan(&m.id, &m.time, &m.direction, &m.body) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestDinoShowsEntries: Dino 0.4 subscribes by chat, as the node page's
// message link and a typed command do, and sees the node's newest entry
// below its command (an XEP-0203 delay stamp, by which Dino sorts, would
// put it above, out of sight), then a new entry. Dino runs under Xvfb in
// a private network and mount namespace (testdata/clients/dino_run.sh),
// where "localhost" on port 5222 is the test's Prosody with STARTTLS and
// a certificate of a private authority that namespace trusts. What shows
// is read from Dino's message database, in Dino's order, and from the
// screen.
func TestDinoShowsEntries(t *testing.T) {
	requireGUI(t, "Dino", "dino-im", "xvfb-run", "dbus-run-session", "import", "convert", "tesseract",
		"xdotool", "unshare", "ip", "setpriv", "python3")
	if os.Getuid() != 0 {
		t.Skip("Dino needs a private network namespace and certificate authority: the test runs as root only")
	}
	testenv.RequireProsody(t)
	dir := t.TempDir()
	ca, cert, key := writeTLS(t, dir)
	p := testenv.StartProsody(t, testenv.ProsodyOptions{Certificate: cert, Key: key})
	srv := readerServer{name: "prosody", x: prosodyServer(p), c2s: p.C2SAddr, register: p.Register}
	r := newReaderSetup(t, srv)
	jid := p.Register("reader", "pw")
	sock := filepath.Join(dir, "c2s.sock")
	forwardUnix(t, sock, p.C2SAddr)

	home := t.TempDir()
	out := filepath.Join(home, "out")
	for _, d := range []string{out, filepath.Join(home, "run")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	giveToNobody(t, home)
	run, _ := filepath.Abs(filepath.Join("testdata", "clients", "dino_run.sh"))
	drv, _ := filepath.Abs(filepath.Join("testdata", "clients", "dino_driver.sh"))
	cmd := exec.Command("unshare", "--net", "--mount", "sh", run, ca, sock, home, drv)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "OUT=" + out, "NO_AT_BRIDGE=1",
		"PINGD_DINO_JID=" + jid, "PINGD_DINO_PASSWORD=pw", "PINGD_DINO_SERVICE=" + p.ComponentDomain,
		"PINGD_DINO_COMMAND=subscribe demo",
	}
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
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
			b, _ := os.ReadFile(filepath.Join(out, "dino.log"))
			t.Logf("client output:\n%s\n%s", logs.String(), b)
		}
	})
	step := func() string {
		b, _ := os.ReadFile(filepath.Join(out, "step"))
		return strings.TrimSpace(string(b))
	}
	signal := func(name string) {
		if err := os.WriteFile(filepath.Join(out, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, 30*time.Second, "Dino to start", func() bool { return step() == "started" })
	testenv.WaitFor(t, 30*time.Second, "Dino to log in with STARTTLS", func() bool {
		return strings.Contains(p.Log(), "Authenticated as "+jid)
	})
	signal("open")
	testenv.WaitFor(t, 30*time.Second, "the command to be typed", func() bool { return step() == "typed" })

	db := filepath.Join(home, ".local", "share", "dino", "dino.db")
	service := p.ComponentDomain
	// findIn returns the position of the first message holding text, in
	// Dino's order, or -1.
	findIn := func(msgs []dinoMessage, text string) int {
		for i, m := range msgs {
			if strings.Contains(m.body, text) {
				return i
			}
		}
		return -1
	}
	var msgs []dinoMessage
	testenv.WaitFor(t, 20*time.Second, "the newest entry in Dino's database", func() bool {
		msgs = dinoMessages(t, db, service)
		return findIn(msgs, "An old entry") >= 0
	})
	cmdAt, entryAt := findIn(msgs, "subscribe demo"), findIn(msgs, "An old entry")
	if cmdAt < 0 || entryAt < cmdAt {
		t.Errorf("Dino shows the newest entry at %d and the command at %d (of %d): want the entry below the command\n%v",
			entryAt, cmdAt, len(msgs), msgs)
	}
	r.publish("new-1", "Fresh for Dino")
	testenv.WaitFor(t, 20*time.Second, "the new entry in Dino's database", func() bool {
		return findIn(dinoMessages(t, db, service), "Fresh for Dino") >= 0
	})
	screen := waitScreenAll(t, filepath.Join(out, "screen.png"), 20*time.Second, "subscribe demo", "An old entry", "Fresh for Dino")
	flat := strings.Join(strings.Fields(screen), " ")
	if a, b := strings.LastIndex(flat, "subscribe demo"), strings.LastIndex(flat, "An old entry"); a > b {
		t.Errorf("on the screen the newest entry is above the command:\n%s", screen)
	}
}

// waitScreenAll waits until tesseract reads every text on the screenshot.
func waitScreenAll(t *testing.T, shot string, limit time.Duration, texts ...string) string {
	t.Helper()
	g := &guiProcess{out: filepath.Dir(shot)}
	return g.waitScreen(t, limit, texts...)
}
