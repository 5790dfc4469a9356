package httpapi

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// TestPingsObserved: every ping reaches Config.ObservePing with its
// dialect and outcome, 429s included.
func TestPingsObserved(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	e := newEnv(t, func(c *Config) {
		c.PingBurst = 2
		c.ObservePing = func(dialect, outcome string) {
			mu.Lock()
			seen[dialect+" "+outcome]++
			mu.Unlock()
		}
	})
	form := func(u string) *strings.Reader { return strings.NewReader(url.Values{"url": {u}}.Encode()) }
	for range 3 {
		e.do(http.MethodPost, "/ping", "", form("http://example.com/feed.xml"), "Content-Type", "application/x-www-form-urlencoded")
	}
	e.do(http.MethodPost, "/ping", "", form("ftp://example.com/x"), "Content-Type", "application/x-www-form-urlencoded")
	e.do(http.MethodPost, "/RPC2", "", strings.NewReader(`<?xml version="1.0"?><methodCall><methodName>weblogUpdates.ping</methodName><params>
<param><value>Blog</value></param><param><value>http://example.org/</value></param></params></methodCall>`), "Content-Type", "text/xml")

	mu.Lock()
	defer mu.Unlock()
	for key, n := range map[string]int{
		DialectREST + " " + PingAccepted:          2,
		DialectREST + " " + PingRateLimited:       1,
		DialectREST + " " + PingRefused:           1,
		DialectWeblogUpdates + " " + PingAccepted: 1,
	} {
		if seen[key] != n {
			t.Errorf("%s observed %d times, want %d (all: %v)", key, seen[key], n, seen)
		}
	}
}
