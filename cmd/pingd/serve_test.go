package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// TestServeJoinsRequestsBeforeClosingTheStore: a request still running
// when the shutdown wait is over (an admin's node creation looking at a
// page that does not answer) is ended and joined before serve closes the
// store, so nothing it does afterwards reaches a closed store.
func TestServeJoinsRequestsBeforeClosingTheStore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pingd serve in the test process")
	}
	arrived, release := make(chan struct{}, 4), make(chan struct{})
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release // answers only after pingd has stopped
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, `<html><head><link rel="alternate" type="application/rss+xml" href="/feed.xml"></head></html>`)
	}))
	defer page.Close()
	defer close(release)

	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cfg, err := loadConfig(newFlagSet("serve", io.Discard), []string{
		"--xmpp-secret", "s", "--xmpp-addr", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)),
		"--http-addr", addr, "--public-url", "http://" + addr, "--admin-token", "admin-secret",
		"--db", filepath.Join(t.TempDir(), "pingd.db"), "--allow-private", "--upstream-push=0",
		"--shutdown-timeout", "200ms",
	}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, slog.New(slog.DiscardHandler)) }()
	testenv.WaitFor(t, 20*time.Second, "/healthz", func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/nodes",
			strings.NewReader(`{"node": "blog", "source": "`+page.URL+`/blog/"}`))
		req.Header.Set("Authorization", "Bearer admin-secret")
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the page was never asked for")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return")
	}
	var stacks bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&stacks, 1); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stacks.String(), "httpapi.(*Admin).createNode") {
		t.Fatalf("a request is still running after serve closed the store:\n%s", stacks.String())
	}
}
