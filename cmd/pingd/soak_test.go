package main

import (
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// The soak tests are the long versions of the reliability tests; they run
// only with PINGD_SOAK=1 (`make soak`), for about half an hour in all.
// docs/reliability.md records what they found.

func requireSoak(t *testing.T) {
	t.Helper()
	if testing.Short() || os.Getenv("PINGD_SOAK") != "1" {
		t.Skip("soak test: run it with make soak (PINGD_SOAK=1)")
	}
}

// TestSoakKill10000 kills pingd with SIGKILL 10 times at random moments
// of a fan-out of 1,000 items to 5 XMPP readers and 5 webhooks (10,000
// notifications); after each restart every subscriber has every item.
func TestSoakKill10000(t *testing.T) {
	requireSoak(t)
	runKillDuringFanOut(t, 1000, 25, 10)
}

// TestSoakXMPPServerRestarts takes Prosody down four times (stopped,
// killed, stopped, killed), each in the middle of a fan-out of 500 items
// to 5 XMPP readers and 2 webhooks, with 500 more published while it is
// down: 28,000 notifications.
func TestSoakXMPPServerRestarts(t *testing.T) {
	requireSoak(t)
	runXMPPServerRestarts(t, 5, 500, 4)
}

// TestSoakSlowAndBrokenReceivers measures the healthy receivers over 12
// rounds before and 12 after the broken ones come.
func TestSoakSlowAndBrokenReceivers(t *testing.T) {
	requireSoak(t)
	runSlowAndBrokenReceivers(t, 12)
}

// TestSoakSlowLoris sends the real binary, with the read timeouts it
// really has (10 s for headers, 30 s for a whole request), headers and
// then a body a byte at a time: each connection is closed at its timeout
// and the ping it carried is not taken.
func TestSoakSlowLoris(t *testing.T) {
	requireSoak(t)
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	d := newDaemon(t, p)
	d.Start(true)
	addr := strings.TrimPrefix(d.URL, "http://")
	const slowURL = "http://slowloris.example/feed"
	form := "url=" + url.QueryEscape(slowURL) + "&name=" + strings.Repeat("s", 100)
	head := "POST /ping HTTP/1.1\r\nHost: pingd\r\nContent-Type: application/x-www-form-urlencoded\r\n" +
		"Content-Length: " + strconv.Itoa(len(form)) + "\r\n\r\n"
	for _, tc := range []struct {
		name      string
		fast      string // sent at once
		slow      string // a byte a second
		timeout   time.Duration
		extraWait time.Duration
	}{
		{"headers", "", head + form, 10 * time.Second, 5 * time.Second},
		{"body", head, form, 30 * time.Second, 5 * time.Second},
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := io.WriteString(c, tc.fast); err != nil {
			t.Fatal(err)
		}
		answer := make(chan string, 1)
		go func() { b, _ := io.ReadAll(c); answer <- string(b) }()
		closedAt := time.Duration(0)
		for i := 0; i < len(tc.slow); i++ {
			if _, err := c.Write([]byte{tc.slow[i]}); err != nil {
				closedAt = time.Since(start)
				break
			}
			select {
			case a := <-answer:
				answer <- a
				closedAt = time.Since(start)
			case <-time.After(time.Second):
			}
			if closedAt > 0 || time.Since(start) > tc.timeout+tc.extraWait {
				break
			}
		}
		a := <-answer
		c.Close()
		if closedAt == 0 {
			closedAt = time.Since(start)
		}
		t.Logf("slow %s: closed after %v, answer %q", tc.name, closedAt.Round(100*time.Millisecond), firstLine(a))
		if closedAt > tc.timeout+tc.extraWait {
			t.Errorf("slow %s: the connection was kept %v (timeout %v)", tc.name, closedAt, tc.timeout)
		}
		if strings.HasPrefix(a, "HTTP/1.1 200") {
			t.Errorf("slow %s: the ping was taken", tc.name)
		}
	}
	d.Stop()
	if storedPings(t, "file:"+d.dbPath)[slowURL] {
		t.Error("a slow-loris ping was stored")
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\r\n")
	return line
}
