package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// latencyPlan sizes measurement 2.
type latencyPlan struct {
	Feeds   int // sources pinged in turn (each stays within the ping rate limit)
	Samples int
	Gap     time.Duration // pause between samples: the system is not saturated
}

// latencyResult is measurement 2: ping → notification, and for reference
// an owner's XMPP publish → notification on the same node kind and client.
type latencyResult struct {
	Ping       []time.Duration // ping request sent → notification read
	PingAnswer []time.Duration // ping request sent → HTTP answer read
	Publish    []time.Duration // XMPP publish sent → notification read
	Lost       int
	Fetches    int // requests the feed server saw during the samples
}

// rpcPing builds a weblogUpdates.ping call.
func rpcPing(name, url string) []byte {
	return []byte(`<?xml version="1.0"?><methodCall><methodName>weblogUpdates.ping</methodName><params>` +
		`<param><value><string>` + xmlEscape(name) + `</string></value></param>` +
		`<param><value><string>` + xmlEscape(url) + `</string></value></param></params></methodCall>`)
}

// postPing sends one XML-RPC ping and reports whether it was accepted.
func postPing(ctx context.Context, client *http.Client, endpoint string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/xml")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, answer)
	}
	if bytes.Contains(answer, []byte("<fault>")) || !bytes.Contains(answer, []byte("<boolean>0</boolean>")) {
		return fmt.Errorf("ping refused: %.300s", answer)
	}
	return nil
}

// arrival is one notification an observer saw.
type arrival struct {
	id string
	at time.Time
}

// watchItems sends the item id of every notification the client reads.
func watchItems(c *client) <-chan arrival {
	ch := make(chan arrival, 1024)
	fn := func(elem []byte, at time.Time) {
		if item := child(elem, "item"); item != nil {
			if id, ok := attr(item, "id"); ok {
				select {
				case ch <- arrival{id, at}:
				default:
				}
			}
		}
	}
	c.onMessage.Store(&fn)
	return ch
}

// awaitItem waits for the notification of item id.
func awaitItem(ctx context.Context, ch <-chan arrival, id string, timeout time.Duration) (time.Time, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case a := <-ch:
			if a.id == id {
				return a.at, nil
			}
		case <-t.C:
			return time.Time{}, fmt.Errorf("no notification of %s within %v", id, timeout)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// measureLatency runs measurement 2 on a Prosody: feeds on a loopback
// server, a node per feed in pingd, one XMPP subscriber of every node.
func measureLatency(ctx context.Context, t testing.TB, plan latencyPlan) latencyResult {
	t.Helper()
	srv := startProsodyServer(t)
	for _, u := range []string{ownerUser, "watcher"} {
		srv.Register(u, benchPassword)
	}
	// Every feed lives on the one loopback feed server, which pings of
	// 50 a second would take over the per-host ping limit; that limit
	// protects publishers' hosts and is not what is measured here.
	p := startPingd(t, pingdOptions{
		XMPPAddr: srv.ComponentAddr, Domain: srv.PingdDomain, Secret: srv.Secret,
		Admins: []string{ownerUser + "@" + srv.Domain}, HTTP: true, Fetch: true,
		PingHostRate: 1000, PingHostBurst: 1000,
	})
	feeds := startFeedServer(t)
	watcher, err := dialClient(ctx, srv.C2SAddr, srv.Domain, "watcher", benchPassword, "w")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(watcher.Close)
	owner, err := dialClient(ctx, srv.C2SAddr, srv.Domain, ownerUser, benchPassword, "o")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(owner.Close)

	var sources []int64
	for i := range plan.Feeds {
		name := fmt.Sprintf("feed%d", i)
		n, _, err := p.Hub.CreateNode(ctx, hub.NodeSpec{Name: name, Source: feeds.FeedURL(name), Config: hub.DefaultNodeConfig()})
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, n.SourceID)
		if _, err := watcher.iq(ctx, subscribeStanza(srv.PingdDomain, name, watcher.jid)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := owner.iq(ctx, createStanza(srv.PingdDomain, "direct")); err != nil {
		t.Fatal(err)
	}
	if _, err := watcher.iq(ctx, subscribeStanza(srv.PingdDomain, "direct", watcher.jid)); err != nil {
		t.Fatal(err)
	}
	// The first fetch of each source is its baseline; pings notify after.
	testenv.WaitFor(t, time.Minute, "every source's baseline fetch", func() bool {
		for _, id := range sources {
			s, err := p.Hub.Source(ctx, id)
			if err != nil || !s.Baselined {
				return false
			}
		}
		return true
	})

	arrivals := watchItems(watcher)
	client := &http.Client{Timeout: 30 * time.Second}
	var res latencyResult
	hitsBefore := 0
	for i := range plan.Feeds {
		hitsBefore += feeds.Hits(fmt.Sprintf("feed%d", i))
	}
	for s := range plan.Samples {
		name := fmt.Sprintf("feed%d", s%plan.Feeds)
		guid := fmt.Sprintf("urn:bench:ping-%d", s)
		feeds.Add(name, guid)
		sent := time.Now()
		if err := postPing(ctx, client, p.HTTPURL+"/RPC2", rpcPing("Bench weblog "+name, feeds.FeedURL(name))); err != nil {
			t.Fatalf("ping %d: %v", s, err)
		}
		res.PingAnswer = append(res.PingAnswer, time.Since(sent))
		at, err := awaitItem(ctx, arrivals, guid, 10*time.Second)
		if err != nil {
			res.Lost++
			t.Logf("sample %d: %v", s, err)
		} else {
			res.Ping = append(res.Ping, at.Sub(sent))
		}
		time.Sleep(plan.Gap)
	}
	for i := range plan.Feeds {
		res.Fetches += feeds.Hits(fmt.Sprintf("feed%d", i))
	}
	res.Fetches -= hitsBefore

	// Reference: an owner's publish over XMPP takes the same fan-out path
	// without the ping and the fetch.
	for s := range plan.Samples {
		id := fmt.Sprintf("direct-%d", s)
		sent := time.Now()
		if _, err := owner.iq(ctx, publishStanza(srv.PingdDomain, "direct", id)); err != nil {
			t.Fatalf("publish %d: %v", s, err)
		}
		at, err := awaitItem(ctx, arrivals, id, 10*time.Second)
		if err != nil {
			res.Lost++
			t.Logf("publish %d: %v", s, err)
			continue
		}
		res.Publish = append(res.Publish, at.Sub(sent))
		time.Sleep(plan.Gap)
	}
	return res
}

func latencyTable(res latencyResult) *table {
	t := &table{header: []string{"path", "samples", "p50", "p99", "max"}}
	row := func(name string, xs []time.Duration) {
		if len(xs) == 0 {
			t.add(name, "0", "–", "–", "–")
			return
		}
		t.add(name, fmt.Sprint(len(xs)), ms(percentile(xs, 50)), ms(percentile(xs, 99)), ms(percentile(xs, 100)))
	}
	row("XML-RPC ping sent → XMPP notification read (conditional fetch included)", res.Ping)
	row("XML-RPC ping sent → HTTP answer read", res.PingAnswer)
	row("reference: XMPP publish sent → XMPP notification read", res.Publish)
	return t
}

// errNoSamples marks a measurement that produced nothing to report.
var errNoSamples = errors.New("no samples")

func checkLatency(res latencyResult, plan latencyPlan) error {
	if len(res.Ping) == 0 {
		return errNoSamples
	}
	if res.Lost > 0 {
		return fmt.Errorf("%d notifications never arrived", res.Lost)
	}
	if len(res.Ping) != plan.Samples || len(res.Publish) != plan.Samples {
		return fmt.Errorf("%d ping and %d publish samples, want %d each", len(res.Ping), len(res.Publish), plan.Samples)
	}
	return nil
}
