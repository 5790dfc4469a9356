package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestConfigTrustedProxies: PINGD_TRUSTED_PROXIES (--trusted-proxies)
// reaches the HTTP API as prefixes; none by default; a list that does not
// read is refused by Validate.
func TestConfigTrustedProxies(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	cfg, err := loadConfig(newFlagSet("serve", &bytes.Buffer{}), []string{"--xmpp-secret", "s"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if p := apiConfig(cfg, log).TrustedProxies; len(p) != 0 {
		t.Errorf("default: trusted proxies %v, want none", p)
	}

	cfg, err = loadConfig(newFlagSet("serve", &bytes.Buffer{}), []string{"--xmpp-secret", "s"},
		env(map[string]string{"PINGD_TRUSTED_PROXIES": "127.0.0.1, 10.0.0.0/8,::1"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(apiConfig(cfg, log).TrustedProxies); got != "[127.0.0.1/32 10.0.0.0/8 ::1/128]" {
		t.Errorf("from the environment: %s", got)
	}

	cfg, err = loadConfig(newFlagSet("serve", &bytes.Buffer{}), []string{"--xmpp-secret", "s", "--trusted-proxies", "10.0.0.0/8,nginx"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "PINGD_TRUSTED_PROXIES") || !strings.Contains(err.Error(), `"nginx"`) {
		t.Errorf("a name in the list: %v, want it refused", err)
	}
}
