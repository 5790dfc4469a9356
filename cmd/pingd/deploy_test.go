package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnit: deploy/pingd.service runs `pingd serve` as its own
// unprivileged user with its database in the state directory, hardened;
// where systemd-analyze is installed, the unit verifies and its exposure
// score stays at 2.0 or below.
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile("../../deploy/pingd.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{
		"ExecStart=/usr/local/bin/pingd serve", "DynamicUser=yes", "StateDirectory=pingd",
		"Environment=PINGD_DB=/var/lib/pingd/pingd.db", "EnvironmentFile=/etc/pingd/pingd.env",
		"NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
		"CapabilityBoundingSet=\n", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
		"SystemCallFilter=@system-service", "Restart=on-failure",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("the unit lacks %q", strings.TrimSpace(want))
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("no systemd-analyze: the unit's syntax is not checked")
		return
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1)")
	}
	// verify wants ExecStart's binary to exist.
	path := filepath.Join(t.TempDir(), "pingd.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/local/bin/pingd", truePath)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err := exec.Command(analyze, "security", "--offline=yes", "--threshold=20", "--no-pager", path).CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		t.Errorf("systemd-analyze security: %v; %s", err, lines[len(lines)-1])
	}
}
