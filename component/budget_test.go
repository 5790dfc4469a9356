package component

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"mellium.im/xmpp/stream"

	"github.com/pingd/pingd/hub"
)

func TestStanzaLimitLowers(t *testing.T) {
	var l stanzaLimit
	if got := l.bytes(); got != stanzaBudget {
		t.Fatalf("budget %d, want %d", got, stanzaBudget)
	}
	// A refused stanza larger than the budget halves it.
	if got, changed := l.lower(300 << 10); !changed || got != stanzaBudget/2 {
		t.Errorf("after a refused 300 KiB stanza: %d (changed %v), want %d", got, changed, stanzaBudget/2)
	}
	// One under the budget: half of it.
	if got, _ := l.lower(70 << 10); got != 35<<10 {
		t.Errorf("after a refused 70 KiB stanza: %d, want %d", got, 35<<10)
	}
	// Never under the floor, and a larger refusal does not raise it.
	l.lower(1000)
	if got, changed := l.lower(1000); changed || got != minStanzaBudget {
		t.Errorf("at the floor: %d (changed %v), want %d unchanged", got, changed, minStanzaBudget)
	}
	if got := l.bytes(); got != minStanzaBudget {
		t.Errorf("budget %d, want the floor %d", got, minStanzaBudget)
	}
}

func TestCutChatAnswer(t *testing.T) {
	short := "a\nb"
	if got := cutChatAnswer(short, 1000); got != short {
		t.Errorf("a short answer was changed: %q", got)
	}
	var lines []string
	for i := range 2000 {
		lines = append(lines, fmt.Sprintf("%d. node-%d & friends", i+1, i))
	}
	got := cutChatAnswer(strings.Join(lines, "\n"), 8<<10)
	if n := escapedLen(got); n > 8<<10 {
		t.Errorf("cut answer is %d bytes escaped, over %d", n, 8<<10)
	}
	if !strings.HasPrefix(got, "1. node-0") || !strings.Contains(got, "more lines") {
		t.Errorf("cut answer does not keep the start and say what was left out: …%s", got[len(got)-80:])
	}
	if got := cutChatAnswer(strings.Repeat("é", 10_000), 4<<10); escapedLen(got) > 4<<10 || !strings.Contains(got, "more lines") {
		t.Errorf("one long line: %d bytes", len(got))
	}
}

// Bursts are split by size as well as by count: 50 entries with long
// links make several messages, each within the budget, listing every
// entry once.
func TestBurstRolesSplitBySize(t *testing.T) {
	now := time.Now()
	var events []hub.Event
	for i := range 50 {
		events = append(events, hub.Event{Kind: hub.EventItem, Seq: int64(i + 1), ItemID: fmt.Sprint(i), Created: now,
			Title: strings.Repeat("T", 2000), Link: "http://example.org/?" + strings.Repeat("a&b", 5000)})
	}
	budget := 200 << 10
	roles := burstRoles(events, budget)
	listed := 0
	chunks := 0
	d := &dispatcher{render: &renderer{domainStr: "pubsub.example.org", limit: &stanzaLimit{}}}
	n := &hub.Node{Name: "n", NodeConfig: hub.NodeConfig{Title: "N"}}
	for _, r := range roles {
		if r.entries == nil {
			continue
		}
		chunks++
		listed += len(r.entries)
		if size := len(d.render.renderBurst(n, r, "id")); size > budget {
			t.Errorf("a burst message of %d entries is %d bytes, over %d", len(r.entries), size, budget)
		}
	}
	if listed != 50 || chunks < 2 {
		t.Errorf("%d entries listed in %d messages, want 50 in several", listed, chunks)
	}
	// Small entries: chunks of maxBurstEntries.
	for i := range events {
		events[i].Title, events[i].Link = "t", "http://example.org/"
	}
	roles = burstRoles(events, budget)
	if len(roles[0].entries) != maxBurstEntries {
		t.Errorf("small entries: a chunk of %d, want %d", len(roles[0].entries), maxBurstEntries)
	}
}

func TestAddressesThatFit(t *testing.T) {
	batch := make([][]byte, 100)
	for i := range batch {
		batch[i] = []byte(strings.Repeat("x", 100) + "@example.org")
	}
	if got := addressesThatFit(batch, 100, 1<<20); got != 100 {
		t.Errorf("all fit: %d", got)
	}
	if got := addressesThatFit(batch, 100, 2000); got < 1 || got > 15 {
		t.Errorf("2000 bytes of room: %d addresses", got)
	}
	if got := addressesThatFit(batch, 100, 10); got != 1 {
		t.Errorf("no room: %d, want at least one", got)
	}
}

// The stream's end is taken as a refusal of the last large stanza when
// the server says so, or, without a stream error, when it comes soon
// after that stanza; other stream errors and late ends change nothing.
func TestRefusedStanza(t *testing.T) {
	conn := func(size int, ago time.Duration) *connection {
		cn := &connection{}
		cn.noteWrite(size) // as a write records it: only stanzas over the floor
		if lw := cn.large.Load(); lw != nil {
			lw.at = time.Now().Add(-ago)
		}
		return cn
	}
	taken := conn(100<<10, 0)
	taken.markerWritten("m1")
	taken.markerReturned("m1")
	late := conn(100<<10, 0)
	late.markerWritten("m1")
	late.noteWrite(80 << 10) // written after the marker: not shown taken
	late.markerReturned("m1")
	tests := []struct {
		name string
		cn   *connection
		err  error
		want int
	}{
		{"policy-violation", conn(100<<10, time.Minute), stream.PolicyViolation, 50 << 10},
		{"not-well-formed", conn(100<<10, time.Minute), stream.NotWellFormed, 50 << 10},
		{"closed right after", conn(100<<10, 0), io.EOF, 50 << 10},
		{"closed long after", conn(100<<10, time.Minute), io.EOF, stanzaBudget},
		{"system-shutdown", conn(100<<10, 0), stream.SystemShutdown, stanzaBudget},
		{"no large stanza", conn(0, 0), stream.PolicyViolation, stanzaBudget},
		{"small stanza", conn(minStanzaBudget/2, 0), stream.PolicyViolation, stanzaBudget},
		{"taken by the server", taken, stream.PolicyViolation, stanzaBudget},
		{"written after the returned marker", late, stream.PolicyViolation, 40 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Component{sharedState: &sharedState{log: slog.New(slog.DiscardHandler), limit: &stanzaLimit{}}}
			c.refusedStanza(tt.cn, tt.err)
			if got := c.limit.bytes(); got != tt.want {
				t.Errorf("budget %d, want %d", got, tt.want)
			}
		})
	}
}

// A digest split into parts is followed at once by the next; a due
// subscription read before the previous part's cursor was recorded must
// not be sent that part again.
func TestStaleDueDigestIsSkipped(t *testing.T) {
	w := newAckWindow(time.Second)
	w.writtenDigest(digestDone{sub: hub.Subscription{ID: 7}, cursor: 3})
	if !w.isDigesting(7, 0) {
		t.Fatal("a digest in flight is not seen")
	}
	w.digestRecorded(7, true, 3)
	if !w.isDigesting(7, 0) {
		t.Error("a subscription read with its cursor before the recorded one is sent the same digest again")
	}
	if w.isDigesting(7, 3) {
		t.Error("a subscription read after its cursor was recorded is held back")
	}
	w.writtenDigest(digestDone{sub: hub.Subscription{ID: 8}, cursor: 5})
	w.digestRecorded(8, false, 5)
	if w.isDigesting(8, 0) {
		t.Error("a digest that was not recorded is not sent again")
	}
}
