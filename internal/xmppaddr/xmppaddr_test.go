package xmppaddr

import "testing"

func TestBare(t *testing.T) {
	for in, want := range map[string]string{
		"user@example.org":            "user@example.org",
		"User@Example.ORG/phone":      "user@example.org",
		"user@example.org.":           "user@example.org",
		"example.org/resource":        "example.org",
		"ünïcode@bücher.example/Res":  "ünïcode@bücher.example",
		"user@xn--bcher-kva.example":  "user@bücher.example",
		"user@example.org/with space": "user@example.org",
	} {
		got, err := Bare(in)
		if err != nil || got != want {
			t.Errorf("Bare(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", " user@example.org", "user@example.org ", "@example.org", "user@", "us er@example.org"} {
		if got, err := Bare(in); err == nil {
			t.Errorf("Bare(%q) = %q, want an error", in, got)
		}
	}
}
