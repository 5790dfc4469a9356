package nodeurl

import "testing"

func TestIsOwnEndpoint(t *testing.T) {
	for _, c := range []struct {
		public, raw string
		want        bool
	}{
		{"https://pingd.example.org", "https://pingd.example.org/websub", true},
		{"https://pingd.example.org", "HTTPS://PingD.Example.ORG:443/websub/", true},
		{"https://pingd.example.org/", "http://pingd.example.org/websub?x=1#f", true},
		{"https://pingd.example.org", "https://pingd.example.org.:0443/websub", true},
		{"https://pingd.example.org", "https://pingd.example.org/pleaseNotify", true},
		{"https://pingd.example.org", "http://pingd.example.org:80/RPC2", true},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080/websub", true},
		{"https://example.org/pingd/", "https://example.org/pingd/websub", true},
		{"https://example.org/pingd", "https://example.org/websub", false},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8081/websub", false},
		{"https://pingd.example.org", "https://hub.example.org/websub", false},
		{"https://pingd.example.org", "https://pingd.example.org/websub/other", false},
		{"https://pingd.example.org", "https://pingd.example.org/", false},
		{"https://pingd.example.org", "not a url", false},
	} {
		if got := IsOwnEndpoint(c.public, c.raw); got != c.want {
			t.Errorf("IsOwnEndpoint(%q, %q) = %v, want %v", c.public, c.raw, got, c.want)
		}
	}
}
