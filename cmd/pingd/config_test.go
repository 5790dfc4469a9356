package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/component"
	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/hub"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pingd.conf")
	if err := os.WriteFile(file, []byte("# comment\nPINGD_HTTP_ADDR=127.0.0.1:1111\nxmpp-domain = \"file.example\"\nPINGD_DB=file.db\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(newFlagSet("serve", &bytes.Buffer{}),
		[]string{"--config", file, "--db", "flag.db", "--allow-private"},
		env(map[string]string{"PINGD_XMPP_DOMAIN": "env.example", "PINGD_DB": "env.db", "PINGD_SHUTDOWN_TIMEOUT": "3s"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != "127.0.0.1:1111" {
		t.Errorf("HTTPAddr = %q, want the file's value", cfg.HTTPAddr)
	}
	if cfg.XMPPDomain != "env.example" {
		t.Errorf("XMPPDomain = %q, want the environment's value over the file's", cfg.XMPPDomain)
	}
	if cfg.DB != "flag.db" {
		t.Errorf("DB = %q, want the flag's value over the environment's", cfg.DB)
	}
	if !cfg.AllowPrivate {
		t.Error("--allow-private alone did not set AllowPrivate")
	}
	if cfg.ShutdownWait != 3*time.Second {
		t.Errorf("ShutdownWait = %v", cfg.ShutdownWait)
	}
	if cfg.XMPPAddr != "127.0.0.1:5347" {
		t.Errorf("XMPPAddr default = %q", cfg.XMPPAddr)
	}
}

func TestConfigValidateListsEveryProblem(t *testing.T) {
	cfg, err := loadConfig(newFlagSet("serve", &bytes.Buffer{}),
		[]string{"--public-url", "ftp://x", "--xmpp-addr", "nohostport", "--admins", "not a jid/res", "--log-format", "xml",
			"--xmpp-multicast", "user@multicast.example.org", "--xmpp-multicast-max", "-1", "--xmpp-multicast-share", "0"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"PINGD_XMPP_SECRET", "PINGD_PUBLIC_URL", "PINGD_XMPP_ADDR", "PINGD_ADMINS", "PINGD_LOG_FORMAT", "PINGD_XMPP_MULTICAST ", "PINGD_XMPP_MULTICAST_MAX", "PINGD_XMPP_MULTICAST_SHARE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s:\n%v", want, err)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 8 {
		t.Errorf("want 8 problems, one per line; got %d:\n%v", n, err)
	}
}

func TestConfigFileErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bad.conf")
	if err := os.WriteFile(file, []byte("PINGD_NOPE=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := loadConfig(newFlagSet("serve", &bytes.Buffer{}), []string{"--config", file}, env(nil))
	if err == nil || !strings.Contains(err.Error(), `bad.conf:1: unknown option "PINGD_NOPE"`) {
		t.Fatalf("err = %v", err)
	}
	_, err = loadConfig(newFlagSet("serve", &bytes.Buffer{}), nil, env(map[string]string{"PINGD_ALLOW_PRIVATE": "maybe"}))
	if err == nil || !strings.Contains(err.Error(), "PINGD_ALLOW_PRIVATE") {
		t.Fatalf("err = %v", err)
	}
}

func TestConfigCommandRedactsSecrets(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"config", "--xmpp-secret", "hunter2", "--admin-token", "tok3n"}, &out, &errOut, env(nil))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if strings.Contains(out.String(), "hunter2") || strings.Contains(out.String(), "tok3n") {
		t.Fatalf("secret printed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "PINGD_XMPP_SECRET=<redacted>") {
		t.Fatalf("secret not shown as redacted:\n%s", out.String())
	}
}

func TestHelpListsEveryOption(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"--help"}, &out, &out, env(nil)); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, o := range (&Config{}).options() {
		if !strings.Contains(out.String(), "--"+o.name) || !strings.Contains(out.String(), o.env) {
			t.Errorf("--help does not list --%s / %s", o.name, o.env)
		}
	}
}

func TestServeRefusesMissingSecret(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"serve", "--db", filepath.Join(t.TempDir(), "x.db")}, &out, &errOut, env(nil))
	if code != 1 || !strings.Contains(errOut.String(), "PINGD_XMPP_SECRET (--xmpp-secret) is required") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
}

// TestCNWSRetryLimit: PINGD_CNWS_RETRY_LIMIT (--cnws-retry-limit) is the
// CNWS draft's "configurable limit" of the ageing: 24 hours by default,
// refused below them, and the limit the CNWS sender gives the engine.
func TestCNWSRetryLimit(t *testing.T) {
	cfg, err := loadConfig(newFlagSet("serve", &bytes.Buffer{}), []string{"--xmpp-secret", "s"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CNWSRetryLimit != 24*time.Hour || cfg.Validate() != nil {
		t.Errorf("default %v, %v", cfg.CNWSRetryLimit, cfg.Validate())
	}
	if got := deliverySenders(cfg, delivery.HTTPSender{}, nil)[hub.KindCNWS].Policy().RetryWindow; got != 24*time.Hour {
		t.Errorf("the CNWS sender's retry window with the default: %v", got)
	}

	cfg, err = loadConfig(newFlagSet("serve", &bytes.Buffer{}), []string{"--xmpp-secret", "s"}, env(map[string]string{"PINGD_CNWS_RETRY_LIMIT": "72h"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := deliverySenders(cfg, delivery.HTTPSender{}, nil)[hub.KindCNWS].Policy().RetryWindow; got != 72*time.Hour {
		t.Errorf("the CNWS sender's retry window with PINGD_CNWS_RETRY_LIMIT=72h: %v", got)
	}

	cfg, err = loadConfig(newFlagSet("serve", &bytes.Buffer{}), []string{"--xmpp-secret", "s", "--cnws-retry-limit", "23h59m"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "PINGD_CNWS_RETRY_LIMIT (--cnws-retry-limit) 23h59m0s: want at least 24h") {
		t.Errorf("23h59m: %v", err)
	}
}

// TestOpenSourcesPolicy: PINGD_OPEN_SOURCES is local by default; all and
// the words for yes open node creation to anyone, the words for no close
// it; anything else is refused at start. PINGD_LOCAL_DOMAINS is a list of
// domains.
func TestOpenSourcesPolicy(t *testing.T) {
	cfg, err := loadConfig(newFlagSet("serve", &bytes.Buffer{}), nil, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if open, local, err := cfg.SourcePolicy(); open || !local || err != nil {
		t.Errorf("default policy: open %v, local %v, %v; want local", open, local, err)
	}
	for value, want := range map[string][2]bool{
		"local": {false, true}, "LOCAL": {false, true}, "all": {true, false}, "1": {true, false}, "true": {true, false},
		"0": {false, false}, "off": {false, false},
	} {
		cfg, err := loadConfig(newFlagSet("serve", &bytes.Buffer{}), []string{"--open-sources", value}, env(nil))
		if err != nil {
			t.Fatal(err)
		}
		open, local, err := cfg.SourcePolicy()
		if err != nil || open != want[0] || local != want[1] {
			t.Errorf("%q: open %v, local %v, %v; want %v", value, open, local, err, want)
		}
	}
	cfg, err = loadConfig(newFlagSet("serve", &bytes.Buffer{}),
		[]string{"--open-sources", "friends", "--local-domains", "example.org, user@example.net"}, env(map[string]string{"PINGD_XMPP_SECRET": "s"}))
	if err != nil {
		t.Fatal(err)
	}
	verr := cfg.Validate()
	for _, want := range []string{`PINGD_OPEN_SOURCES (--open-sources) "friends"`, `PINGD_LOCAL_DOMAINS (--local-domains): "user@example.net"`} {
		if verr == nil || !strings.Contains(verr.Error(), want) {
			t.Errorf("Validate = %v; want it to mention %s", verr, want)
		}
	}
	if got := cfg.LocalDomainList(); len(got) != 2 || got[0] != "example.org" {
		t.Errorf("LocalDomainList = %q", got)
	}
	// The help names the component's per-JID limit.
	var help bytes.Buffer
	usage(&help)
	if want := fmt.Sprintf("at most %d nodes per JID per hour", component.DefaultNodesPerHour); !strings.Contains(help.String(), want) {
		t.Errorf("--help does not say %q", want)
	}
}

// TestImplicitNodeOptions: the bounds on implicit nodes and on callbacks
// per host refuse values that mean nothing; 0 implicit nodes is a valid
// choice (owners' nodes only).
func TestImplicitNodeOptions(t *testing.T) {
	cfg, err := loadConfig(newFlagSet("serve", &bytes.Buffer{}),
		[]string{"--xmpp-secret", "s", "--implicit-nodes-per-hour", "0", "--max-implicit-nodes", "-1",
			"--max-callback-host-subscriptions", "0", "--max-account-subscriptions", "0"},
		env(map[string]string{"PINGD_MAX_NODE_RESOURCES": "-1"}))
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Validate()
	for _, want := range []string{"PINGD_IMPLICIT_NODES_PER_HOUR", "PINGD_MAX_IMPLICIT_NODES", "PINGD_MAX_CALLBACK_HOST_SUBSCRIPTIONS",
		"PINGD_MAX_ACCOUNT_SUBSCRIPTIONS", "PINGD_MAX_NODE_RESOURCES"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %s", err, want)
		}
	}
	cfg, err = loadConfig(newFlagSet("serve", &bytes.Buffer{}), []string{"--xmpp-secret", "s", "--max-implicit-nodes", "0"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil || cfg.MaxImplicitNodes != 0 || cfg.ImplicitNodesPerHour != 300 || cfg.MaxCallbackHostSubscriptions != 10000 ||
		cfg.MaxAccountSubscriptions != 1000 || cfg.MaxNodeResources != 10 {
		t.Fatalf("Validate = %v; max %d, per hour %d", err, cfg.MaxImplicitNodes, cfg.ImplicitNodesPerHour)
	}
}

// TestPingCommitDelay: off by default; a few milliseconds reach the hub;
// more than 100ms, or a negative delay, is refused at start.
func TestPingCommitDelay(t *testing.T) {
	cfg, err := loadConfig(newFlagSet("serve", &bytes.Buffer{}), []string{"--xmpp-secret", "s"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PingCommitDelay != 0 || cfg.Validate() != nil || hubConfig(cfg, nil).PingCommitDelay != 0 {
		t.Errorf("default %v, %v", cfg.PingCommitDelay, cfg.Validate())
	}
	cfg, err = loadConfig(newFlagSet("serve", &bytes.Buffer{}), []string{"--xmpp-secret", "s"}, env(map[string]string{"PINGD_PING_COMMIT_DELAY": "2ms"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil || hubConfig(cfg, nil).PingCommitDelay != 2*time.Millisecond {
		t.Errorf("2ms: %v, hub gets %v", err, hubConfig(cfg, nil).PingCommitDelay)
	}
	for _, bad := range []string{"101ms", "-1ms"} {
		cfg, err = loadConfig(newFlagSet("serve", &bytes.Buffer{}), []string{"--xmpp-secret", "s", "--ping-commit-delay", bad}, env(nil))
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "PINGD_PING_COMMIT_DELAY (--ping-commit-delay)") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
