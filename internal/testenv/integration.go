package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// IntegrationEnv names the variable that turns a missing server or program
// from a skip into a failure. make test sets it to "require", so a machine
// where scripts/test-deps.sh did not install something cannot pass by
// silently running fewer tests; a plain go test leaves it unset, so a
// newcomer without Prosody, ejabberd or PostgreSQL still gets the unit
// tests and a skip that says what to install.
const IntegrationEnv = "PINGD_INTEGRATION"

// IntegrationRequired reports whether IntegrationEnv asks for every
// integration test to run.
func IntegrationRequired() bool { return os.Getenv(IntegrationEnv) == "require" }

// Missing ends the test because something it needs is not there: a skip
// naming it and how to get it, or a failure when IntegrationRequired. The
// message says what is missing and how to install it.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	fatal, msg := requireOrSkip(IntegrationRequired(), fmt.Sprintf(format, args...))
	if fatal {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// requireOrSkip decides how a test ends when what it needs is missing, and
// with which message.
func requireOrSkip(required bool, missing string) (fatal bool, msg string) {
	if required {
		return true, fmt.Sprintf("%s (%s=require: integration tests must run, not skip)", missing, IntegrationEnv)
	}
	return false, fmt.Sprintf("skipped: %s; make test installs it (scripts/test-deps.sh) and runs every test, %s=require makes this a failure", missing, IntegrationEnv)
}

// RequireProgram returns the path of bin, or ends the test through Missing
// when it is not on PATH; install says how to get it (such as
// "apt-get install -y curl").
func RequireProgram(t testing.TB, bin, install string) string {
	t.Helper()
	path, err := exec.LookPath(bin)
	if err != nil {
		Missing(t, "%s is not installed (%s): %v", bin, install, err)
	}
	return path
}
