package fetching

import (
	"fmt"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
)

func hostSource(id int64, url string, lease time.Time) hub.Source {
	return hub.Source{ID: id, SourceState: hub.SourceState{URL: url}, LeaseUntil: lease}
}

// TestFetchHostsSlotsSpacingAndOverflow: a host takes FetchesPerHost
// waiting sources, gives the overflow back at its pace, starts one fetch
// per spacing, and forgets itself once idle.
func TestFetchHostsSlotsSpacingAndOverflow(t *testing.T) {
	now := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	lease := now.Add(time.Hour)
	f := newFetchHosts(2, 10*time.Second)
	var back []time.Time
	for i := range 5 {
		at, reason, queued := f.admit(hostSource(int64(i), "http://a.example/feed"+fmt.Sprint(i), lease), now, 40*time.Second)
		if queued != (i < 2) {
			t.Fatalf("source %d: queued %v", i, queued)
		}
		if !queued {
			if reason != hub.ReasonHostBusy {
				t.Fatalf("source %d given back for %q", i, reason)
			}
			back = append(back, at)
		}
	}
	// With a 40s fetch timeout and a 10s spacing the host keeps two
	// waiting; the overflow is due after them, one spacing apart.
	for i, at := range back {
		if want := now.Add(time.Duration(i+3) * 10 * time.Second); !at.Equal(want) {
			t.Errorf("overflow %d due %v, want %v", i, at, want)
		}
	}
	if _, ok, _ := f.next(now, time.Minute); !ok {
		t.Fatal("the first fetch of the host did not start")
	}
	if _, ok, _ := f.next(now.Add(9*time.Second), time.Minute); ok {
		t.Fatal("a second fetch started within the spacing")
	}
	if at := f.wakeAt(now); !at.Equal(now.Add(10 * time.Second)) {
		t.Errorf("wake at %v, want the spacing's end", at)
	}
	src, ok, _ := f.next(now.Add(10*time.Second), time.Minute)
	if !ok || src.ID != 1 {
		t.Fatalf("after the spacing: %v %v", src.ID, ok)
	}
	f.finished("a.example:80", time.Second, time.Time{}, now)
	f.finished("a.example:80", time.Second, time.Time{}, now)
	f.forget(now.Add(time.Hour))
	if len(f.hosts) != 0 || len(f.ready) != 0 || f.waiting != 0 {
		t.Fatalf("after the work: %d hosts, %d ready, %d waiting", len(f.hosts), len(f.ready), f.waiting)
	}
	for i := range 1000 {
		host := fmt.Sprintf("http://h%d.example/", i)
		f.admit(hostSource(int64(i), host, lease), now, time.Minute)
		if _, ok, _ := f.next(now, time.Minute); !ok {
			t.Fatalf("host %d not started", i)
		}
		f.finished(hub.HostKey(host), time.Millisecond, time.Time{}, now)
	}
	f.forget(now.Add(time.Minute))
	if len(f.hosts) != 0 {
		t.Fatalf("%d hosts remembered after 1000 short jobs, want 0", len(f.hosts))
	}
}

// TestFetchHostsPause: a 429 or 503 pauses the host: what waits for it
// is given back due at the pause's end, and so is what is claimed later.
func TestFetchHostsPause(t *testing.T) {
	now := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	f := newFetchHosts(1, 0)
	f.admit(hostSource(1, "http://a.example/1", now.Add(time.Hour)), now, time.Minute)
	if _, ok, _ := f.next(now, time.Minute); !ok {
		t.Fatal("not started")
	}
	f.admit(hostSource(2, "http://a.example/2", now.Add(time.Hour)), now, time.Minute)
	pause := hostPause(429, now.Add(2*time.Minute), now)
	back, at := f.finished("a.example:80", time.Second, pause, now)
	if len(back) != 1 || back[0].ID != 2 || !at.Equal(now.Add(2*time.Minute)) {
		t.Fatalf("given back %v until %v", back, at)
	}
	if at, reason, queued := f.admit(hostSource(3, "http://a.example/3", now.Add(time.Hour)), now.Add(time.Minute), time.Minute); queued ||
		reason != hub.ReasonHostPaused || !at.Equal(now.Add(2*time.Minute)) {
		t.Fatalf("claimed during the pause: queued %v, due %v (%s)", queued, at, reason)
	}
	if f.paused(now.Add(time.Minute)) != 1 || f.paused(now.Add(2*time.Minute)) != 0 {
		t.Fatal("paused hosts miscounted")
	}
	for _, c := range []struct {
		status int
		retry  time.Time
		want   time.Time
	}{
		{503, time.Time{}, now.Add(DefaultHostPause)},
		{429, now.Add(30 * 24 * time.Hour), now.Add(MaxHostPause)},
		{500, now.Add(time.Hour), time.Time{}},
		{200, time.Time{}, time.Time{}},
	} {
		if got := hostPause(c.status, c.retry, now); !got.Equal(c.want) {
			t.Errorf("hostPause(%d, %v) = %v, want %v", c.status, c.retry, got, c.want)
		}
	}
}
