package metrics

import (
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
		if !strings.HasPrefix(line, "pingd_") {
			t.Errorf("series not named pingd_…: %s", line)
		}
	}
	if series < 20 {
		t.Fatalf("only %d series:\n%s", series, body)
	}
	for _, want := range []string{`pingd_fetches_total{class="2xx"} 1`, "pingd_component_connected 1", "pingd_component_reconnects_total 3", "pingd_go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("missing %q", want)
		}
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
