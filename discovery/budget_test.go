package discovery

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/pingd/pingd/internal/ratelimit"
)

// TestLookupRequestsAreCounted: every request a look-up makes counts
// against its budget, each hop of a redirect chain and each descriptor
// included, and the requests stop when the budget is spent: a page that
// redirects five times and names three descriptors that redirect five
// times each costs 24 requests, and a budget of 10 lets 10 reach the
// server.
func TestLookupRequestsAreCounted(t *testing.T) {
	s := newSite(t)
	hits := &s.hits
	for i := range 5 {
		s.pages[fmt.Sprintf("/p%d", i)] = page{redirect: fmt.Sprintf("{base}/p%d", i+1)}
		for d := range 3 {
			s.pages[fmt.Sprintf("/d%d-%d", d, i)] = page{redirect: fmt.Sprintf("{base}/d%d-%d", d, i+1)}
		}
	}
	// Three descriptors, named three ways: a Link header, the meta tag and
	// a link element.
	s.pages["/p5"] = page{contentType: "text/html", headers: map[string]string{"Link": `<{base}/d2-0>; rel="getpingd.updates.descriptor"`},
		body: `<html><head>
<meta http-equiv="X-XRDS-Location" content="{base}/d0-0">
<link rel="getpingd.updates.descriptor" href="{base}/d1-0">
<link rel="alternate" type="application/atom+xml" href="{base}/feed" title="f">
</head><body></body></html>`}
	for d := range 3 {
		s.pages[fmt.Sprintf("/d%d-5", d)] = page{contentType: ContentTypeXRDS, body: xrdsBody}
	}
	c := testClient()

	unbounded := ratelimit.NewLookups(ratelimit.LookupLimits{RequestsPerHour: 1000, Burst: 1000})
	lk, err := unbounded.Begin(context.Background(), "a@example.org", true)
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Discover(lk.Context(), s.URL+"/p0")
	lk.End()
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Descriptors) != 3 || len(f.Services) != 3 {
		t.Fatalf("descriptors %v, services %d: want three of each", f.Descriptors, len(f.Services))
	}
	if got := lk.Requests(); got != 24 || hits.Load() != 24 {
		t.Fatalf("the look-up counted %d requests and the site saw %d, want 24 and 24", got, hits.Load())
	}

	hits.Store(0)
	bounded := ratelimit.NewLookups(ratelimit.LookupLimits{RequestsPerHour: 1, Burst: 10})
	lk, err = bounded.Begin(context.Background(), "a@example.org", true)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Discover(lk.Context(), s.URL+"/p0")
	lk.End()
	if got := hits.Load(); got != 10 {
		t.Fatalf("with a budget of 10 the site saw %d requests", got)
	}
	_, err = bounded.Begin(context.Background(), "a@example.org", true)
	if !errors.Is(err, ratelimit.ErrLookupBudget) {
		t.Fatalf("the next look-up: %v, want refused before any request", err)
	}
	if got := hits.Load(); got != 10 {
		t.Fatalf("a refused look-up made requests: %d", got-10)
	}
}
