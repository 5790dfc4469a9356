package ratelimit

import "testing"

func TestClientKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1": "192.0.2.1", "::ffff:192.0.2.1": "192.0.2.1", "2001:db8::1": "2001:db8::/64",
		"2001:db8:0:0:ffff::1": "2001:db8::/64", "2001:db8:0:1::1": "2001:db8:0:1::/64", "fe80::1%eth0": "fe80::/64",
		"::1": "::/64", "pipe": "pipe",
		"192.0.2.1:8080": "192.0.2.1", "[2001:db8::1]:443": "2001:db8::/64",
	} {
		if got := ClientKey(in); got != want {
			t.Errorf("ClientKey(%q) = %q, want %q", in, got, want)
		}
	}
}
