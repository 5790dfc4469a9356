package main

import (
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunLocalInstructions: make run's instructions give a Profanity line
// that connects (tls disable, the c2s port) with why it is needed, and the
// export line the admin CLI needs.
func TestRunLocalInstructions(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	cmd := exec.Command("bash", "../../scripts/run-local.sh", "--instructions")
	cmd.Env = append(os.Environ(), "PROSODY_C2S_PORT=25999", "PINGD_HTTP_ADDR=127.0.0.1:28999",
		"DEMO_FEED_PORT=28998", "PINGD_ADMIN_TOKEN=tok-123")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run-local.sh --instructions: %v\n%s", err, out)
	}
	for _, want := range []string{
		"/connect alice@localhost server 127.0.0.1 port 25999 tls disable",
		`"Login failed"`,
		"export PINGD_ADMIN_TOKEN=tok-123 PINGD_SERVER=http://127.0.0.1:28999",
		"http://127.0.0.1:28998/feed.xml",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the instructions lack %q:\n%s", want, out)
		}
	}
}

// TestDemoFeedLinks: the demo feed's links point at the port its server
// listens on, and at pages that exist, also for items added later
// without DEMO_FEED_PORT.
func TestDemoFeedLinks(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	www := t.TempDir()
	script := func(port string, args ...string) {
		cmd := exec.Command("bash", append([]string{"../../scripts/demo-feed.sh"}, args...)...)
		cmd.Env = append(os.Environ(), "DEMO_WWW="+www, "DEMO_FEED_PORT="+port)
		if port == "" {
			cmd.Env = append(os.Environ(), "DEMO_WWW="+www)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("demo-feed.sh %v: %v\n%s", args, err, out)
		}
	}
	script("28997", "init")
	script("", "add", "Fish & <chips>")
	b, err := os.ReadFile(filepath.Join(www, "feed.xml"))
	if err != nil {
		t.Fatal(err)
	}
	var rss struct {
		Channel struct {
			Link  string `xml:"link"`
			Items []struct {
				Title string `xml:"title"`
				Link  string `xml:"link"`
			} `xml:"item"`
		} `xml:"channel"`
	}
	if err := xml.Unmarshal(b, &rss); err != nil {
		t.Fatalf("the demo feed is not XML: %v\n%s", err, b)
	}
	const site = "http://127.0.0.1:28997/"
	if rss.Channel.Link != site || len(rss.Channel.Items) != 2 || rss.Channel.Items[0].Title != "Fish & <chips>" {
		t.Fatalf("demo feed: %+v", rss.Channel)
	}
	for _, it := range rss.Channel.Items {
		rest, ok := strings.CutPrefix(it.Link, site)
		if !ok {
			t.Errorf("item %q links to %s, not to the demo server %s", it.Title, it.Link, site)
			continue
		}
		if _, err := os.Stat(filepath.Join(www, rest)); err != nil {
			t.Errorf("item %q links to a page that is not there: %v", it.Title, err)
		}
	}
}
