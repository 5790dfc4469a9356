package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// The upstream subscriptions, on both backends.
func TestUpstreams(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testUpstreams(t, openSQLite(t)) })
	t.Run("postgres", func(t *testing.T) {
		testenv.SkipWithoutPostgres(t)
		testUpstreams(t, openPostgres(t))
	})
}

func testUpstreams(t *testing.T, s store.Store) {
	defer s.Close()
	ctx := context.Background()
	us, ok := s.(hub.UpstreamStore)
	if !ok {
		t.Fatal("the store does not keep upstream subscriptions")
	}
	src, _, err := s.EnsureSource(ctx, "https://example.org/feed.xml")
	if err != nil {
		t.Fatal(err)
	}
	renew := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	u := &hub.Upstream{SourceID: src.ID, Kind: hub.UpstreamWebSub, Endpoint: "https://hub.example.org/", Topic: src.URL,
		Secret: "s", State: hub.UpstreamPending, NextRenewAt: renew}
	if err := us.PutUpstream(ctx, u); err != nil || u.ID == 0 {
		t.Fatalf("put: %v, id %d", err, u.ID)
	}
	first := u.ID
	// The same source and kind replaces it, keeping the id.
	u2 := &hub.Upstream{SourceID: src.ID, Kind: hub.UpstreamWebSub, Endpoint: "https://hub2.example.org/", Topic: src.URL,
		Secret: "t", State: hub.UpstreamActive, LeaseSeconds: 3600, ExpiresAt: renew.Add(time.Hour), NextRenewAt: renew}
	if err := us.PutUpstream(ctx, u2); err != nil || u2.ID != first {
		t.Fatalf("replace: %v, id %d want %d", err, u2.ID, first)
	}
	cloud := &hub.Upstream{SourceID: src.ID, Kind: hub.UpstreamRSSCloud, Endpoint: "http://rpc.example.org:5337/pleaseNotify", Topic: src.URL, State: hub.UpstreamActive}
	if err := us.PutUpstream(ctx, cloud); err != nil {
		t.Fatal(err)
	}
	got, err := us.Upstream(ctx, first)
	if err != nil || got.Endpoint != "https://hub2.example.org/" || got.State != hub.UpstreamActive || got.LeaseSeconds != 3600 ||
		!got.ExpiresAt.Equal(renew.Add(time.Hour)) || !got.NextRenewAt.Equal(renew) || !got.LastPushAt.IsZero() || got.Secret != "t" {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if err := us.MarkUpstreamPush(ctx, first, renew); err != nil {
		t.Fatal(err)
	}
	list, err := us.UpstreamsOfSource(ctx, src.ID)
	if err != nil || len(list) != 2 || !list[0].LastPushAt.Equal(renew) {
		t.Fatalf("of source: %+v, %v", list, err)
	}
	if err := us.PutUpstream(ctx, &hub.Upstream{SourceID: src.ID, Kind: "gopher"}); !errors.Is(err, hub.ErrInvalid) {
		t.Errorf("an unknown kind: %v", err)
	}
	if err := us.DeleteUpstream(ctx, first); err != nil {
		t.Fatal(err)
	}
	if _, err := us.Upstream(ctx, first); !errors.Is(err, hub.ErrNotFound) {
		t.Errorf("deleted: %v", err)
	}
	if err := us.DeleteUpstream(ctx, first); !errors.Is(err, hub.ErrNotFound) {
		t.Errorf("deleted twice: %v", err)
	}
	all, err := us.Upstreams(ctx)
	if err != nil || len(all) != 1 || all[0].Kind != hub.UpstreamRSSCloud {
		t.Errorf("all: %+v, %v", all, err)
	}
}
