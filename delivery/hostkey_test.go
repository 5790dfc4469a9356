package delivery

import "testing"

// TestHostOfFoldsSpellings: the per-host delivery limit keys a receiver by
// its canonical origin, so callbacks that spell one host several ways (a
// zero-padded or default port, a trailing dot, upper case) share its slots.
func TestHostOfFoldsSpellings(t *testing.T) {
	want := hostOf("http://cb.example:18190/hook")
	for _, addr := range []string{
		"http://cb.example:018190/other", "http://cb.example:0018190/x?y", "http://cb.example.:18190/",
		"HTTP://CB.EXAMPLE:18190/rpc#http%3A%2F%2Ffeed.example%2F",
	} {
		if got := hostOf(addr); got != want {
			t.Errorf("hostOf(%s) = %q, want %q", addr, got, want)
		}
	}
	if a, b := hostOf("http://cb.example/"), hostOf("http://cb.example:80/"); a != b {
		t.Errorf("the default port spelled out is another host: %q, %q", a, b)
	}
}
