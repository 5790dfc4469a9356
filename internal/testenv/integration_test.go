package testenv

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestRequireOrSkip: a missing server is a skip naming it and make test by
// default, and a failure naming PINGD_INTEGRATION=require when that is set.
func TestRequireOrSkip(t *testing.T) {
	const missing = "prosody is not installed (apt-get install -y prosody)"
	fatal, msg := requireOrSkip(false, missing)
	if fatal {
		t.Errorf("without %s a missing program failed the test: %s", IntegrationEnv, msg)
	}
	for _, want := range []string{missing, "make test", IntegrationEnv + "=require"} {
		if !strings.Contains(msg, want) {
			t.Errorf("skip message %q lacks %q", msg, want)
		}
	}
	fatal, msg = requireOrSkip(true, missing)
	if !fatal {
		t.Errorf("under %s=require a missing program only skipped: %s", IntegrationEnv, msg)
	}
	for _, want := range []string{missing, IntegrationEnv + "=require"} {
		if !strings.Contains(msg, want) {
			t.Errorf("failure message %q lacks %q", msg, want)
		}
	}
}

// TestIntegrationRequired reads the variable make test sets.
func TestIntegrationRequired(t *testing.T) {
	for value, want := range map[string]bool{"": false, "require": true, "0": false} {
		t.Setenv(IntegrationEnv, value)
		if got := IntegrationRequired(); got != want {
			t.Errorf("%s=%q: IntegrationRequired() = %v, want %v", IntegrationEnv, value, got, want)
		}
	}
}

// TestMissingProgram runs RequireProgram on a name no machine has, in a
// subtest, and checks that it skips by default and fails under require.
func TestMissingProgram(t *testing.T) {
	const bin = "pingd-test-no-such-program"
	for _, required := range []bool{false, true} {
		value := ""
		if required {
			value = "require"
		}
		t.Run("required="+value, func(t *testing.T) {
			t.Setenv(IntegrationEnv, value)
			rec := &recordingTB{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				RequireProgram(rec, bin, "no package has it")
			}()
			<-done
			if rec.skipped == required || rec.failed != required {
				t.Errorf("required=%v: skipped=%v failed=%v (%s)", required, rec.skipped, rec.failed, rec.msg)
			}
			if !strings.Contains(rec.msg, bin) {
				t.Errorf("message %q does not name %s", rec.msg, bin)
			}
		})
	}
}

// recordingTB records how a helper ended the test instead of ending it;
// Skip and Fatal stop the helper's goroutine as the real ones do.
type recordingTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Skip(args ...any) {
	r.skipped, r.msg = true, strings.TrimSpace(fmt.Sprintln(args...))
	runtime.Goexit()
}

func (r *recordingTB) Fatal(args ...any) {
	r.failed, r.msg = true, strings.TrimSpace(fmt.Sprintln(args...))
	runtime.Goexit()
}
