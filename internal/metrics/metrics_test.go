package metrics

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestEverySeriesIsPingd(t *testing.T) {
	Fetches.WithLabelValues(FetchClass(200, nil)).Inc()
	SetComponentState(func() bool { return true })
	SetComponentReconnects(func() int64 { return 3 })
	SetXMPPCounts(func() (int64, int64, int64) { return 5, 0, 2 })
	SetStateReader(func(context.Context) (State, error) {
		return State{SourcesLate: 1, DeliveryBacklogEvents: 9, Upstream: map[string]int{"active": 4}}, nil
	})
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
		t.Fatalf("HTTP %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	var series int
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		series++
		if !strings.HasPrefix(line, "pingd_") && !IsStandardSeries(line) {
			t.Errorf("series neither pingd_… nor a standard go_/process_ one: %s", line)
		}
	}
	if series < 20 {
		t.Fatalf("only %d series:\n%s", series, body)
	}
	for _, want := range []string{`pingd_fetches_total{class="2xx"} 1`, "pingd_component_connected 1", "pingd_component_reconnects_total 3",
		"\ngo_goroutines ", "\nprocess_cpu_seconds_total ", `pingd_xmpp_notifications_sent_total{via="unicast"} 5`, "pingd_xmpp_notifications_bounced_total 2",
		`pingd_upstream_subscriptions{state="active"} 4`, "pingd_sources_late 1", "pingd_delivery_backlog_events 9"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("missing %q", want)
		}
	}
}

// TestNoPrefixedRuntimeSeries: the runtime series are not served twice,
// once under pingd_.
func TestNoPrefixedRuntimeSeries(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if b := rec.Body.String(); strings.Contains(b, "pingd_go_") || strings.Contains(b, "pingd_process_") {
		t.Fatal("the runtime series are served under pingd_…")
	}
}

func TestFetchClass(t *testing.T) {
	for _, c := range []struct {
		status int
		err    error
		want   string
	}{{200, nil, "2xx"}, {226, nil, "226"}, {304, nil, "304"}, {301, nil, "3xx"}, {404, errors.New("x"), "4xx"},
		{410, nil, "410"}, {503, errors.New("x"), "5xx"}, {0, errors.New("refused"), "error"}} {
		if got := FetchClass(c.status, c.err); got != c.want {
			t.Errorf("FetchClass(%d) = %q, want %q", c.status, got, c.want)
		}
	}
}

// TestStateReadOncePerInterval: scrapes in a burst share one reading of
// the database, and a failing reading leaves the figures out.
func TestStateReadOncePerInterval(t *testing.T) {
	var reads int
	fail := false
	SetStateReader(func(context.Context) (State, error) {
		reads++
		if fail {
			return State{}, errors.New("down")
		}
		return State{Nodes: 3}, nil
	})
	scrape := func() string {
		rec := httptest.NewRecorder()
		Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	for range 20 {
		if b := scrape(); !strings.Contains(b, "\npingd_nodes 3\n") || !strings.Contains(b, "\npingd_state_reading_ok 1\n") {
			t.Fatalf("scrape:\n%s", b)
		}
	}
	if reads != 1 {
		t.Fatalf("20 scrapes read the database %d times, want once", reads)
	}
	fail = true
	SetStateReader(func(context.Context) (State, error) { reads++; return State{}, errors.New("down") })
	if b := scrape(); strings.Contains(b, "\npingd_nodes ") || !strings.Contains(b, "\npingd_state_reading_ok 0\n") {
		t.Fatalf("scrape with the database down:\n%s", b)
	}
}
