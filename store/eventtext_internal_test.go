package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
)

// TestEventDictFixed: the rows packed as eventPackedV1 are read with
// eventDictV1's bytes, so they must not change; a new dictionary is a new
// encoding beside it.
func TestEventDictFixed(t *testing.T) {
	sum := sha256.Sum256([]byte(eventDictV1))
	if got := hex.EncodeToString(sum[:]); got != eventDictV1SHA256 {
		t.Fatalf("eventDictV1 changed (sha256 %s, rows packed with it have %s): add a new encoding instead", got, eventDictV1SHA256)
	}
}

// eventDictV1SHA256 is the sha256 of eventDictV1 as rows were packed with.
const eventDictV1SHA256 = "c7a2343702a4a8c1e6ef2cf442eb7d6d68a63e3c3266a52bbcfffc91235e9665"

// sampleEntry is an item event as the feed parser makes one of the
// polling benchmark's entries (sampleFeed): an Atom entry with the title,
// link, date and an 850-byte summary of the RSS item, and the plain-text
// copies beside it.
func sampleEntry(i, n int) hub.Event {
	seed := uint64(i)*1_000_003 + uint64(n)*7_919 + 1
	var words []string
	size := 0
	for size < 850 {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		w := sampleWords[seed%uint64(len(sampleWords))]
		words = append(words, w)
		size += len(w) + 1
	}
	id := fmt.Sprintf("http://origin.bench.example/%d/posts/%d.html", i, n)
	title := fmt.Sprintf("Post %d: %s", n, strings.Join(words[:6], " "))
	updated := time.Date(2026, 1, 1, 0, n, 0, 0, time.UTC)
	text := strings.Join(words, " ")
	summary := text[:497] + "…"
	payload := fmt.Sprintf(`<entry xmlns="http://www.w3.org/2005/Atom"><id>%s</id><title type="text">%s</title>`+
		`<link rel="alternate" href="%s"/><updated>%s</updated><summary type="html">%s</summary></entry>`,
		id, title, id, updated.Format(time.RFC3339), text)
	return hub.Event{Kind: hub.EventItem, ItemID: id, Payload: []byte(payload), Title: title, Summary: summary,
		Link: id, Updated: updated}
}

// insertAsBefore stores e as every row was stored before migration 0023:
// each field in its column, no encoding.
func insertAsBefore(ctx context.Context, t *testing.T, s *sqlStore, nodeID, seq int64, e hub.Event) {
	t.Helper()
	if _, err := s.write.ExecContext(ctx, `UPDATE nodes SET last_seq = $2 WHERE id = $1`, nodeID, seq); err != nil {
		t.Fatal(err)
	}
	if _, err := s.write.ExecContext(ctx, `INSERT INTO events (node_id, seq, kind, item_id, payload,
		title, summary, link, address, plain_type, publisher, updated, created)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		nodeID, seq, string(e.Kind), e.ItemID, e.Payload, e.Title, e.Summary, e.Link,
		e.Address, e.PlainType, e.Publisher, s.timeArg(e.Updated), s.timeArg(time.Now())); err != nil {
		t.Fatal(err)
	}
	if e.Kind == hub.EventItem {
		if _, err := s.write.ExecContext(ctx, `INSERT INTO items (node_id, item_id, seq) VALUES ($1, $2, $3)
			ON CONFLICT (node_id, item_id) DO UPDATE SET seq = excluded.seq`, nodeID, e.ItemID, seq); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPackedEventsReadAsStoredBefore: every event reads back from a row
// written now (packed when it is an item with a payload) the same as from
// a row written as before migration 0023 (every column as it is), through
// EventsAfter, Items and a delivery claim; packed rows are smaller, and
// the columns they leave empty are empty.
func TestPackedEventsReadAsStoredBefore(t *testing.T) {
	entry := sampleEntry(7, 19)
	untitled := sampleEntry(8, 3)
	untitled.Title, untitled.Summary, untitled.Link, untitled.Updated = "", "", "", time.Time{}
	odd := sampleEntry(9, 4)
	odd.ItemID, odd.Title = "tag:example.org,2031:é✓", "Ünïcode — title\nwith a line"
	odd.Updated = time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.FixedZone("x", 3600))
	farFuture := sampleEntry(9, 5)
	farFuture.Updated = time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)
	published := hub.Event{Kind: hub.EventItem, ItemID: "p1", Payload: []byte("<note xmlns='urn:x'>hi</note>"),
		Publisher: "owner@example.org/desk", Title: "Hi"}
	events := []hub.Event{
		entry, untitled, odd, farFuture, published,
		{Kind: hub.EventItem, ItemID: "empty"},
		{Kind: hub.EventChange, Title: "Changed", Summary: "a note", Link: "https://example.org/"},
		{Kind: hub.EventRetract, ItemID: "gone"},
		{Kind: hub.EventRevoke, Address: "x@example.org", PlainType: hub.NotifyChat},
	}
	wantPacked := []bool{true, true, true, false, false, false, false, false, false}
	for _, bc := range backendCases() {
		t.Run(bc.name, func(t *testing.T) {
			ctx := context.Background()
			s := bc.migrated(t)
			before := &hub.Node{Name: "before", NodeConfig: hub.DefaultNodeConfig()}
			now := &hub.Node{Name: "now", NodeConfig: hub.DefaultNodeConfig()}
			for _, n := range []*hub.Node{before, now} {
				n.MaxItems = 100
				if err := s.CreateNode(ctx, n); err != nil {
					t.Fatal(err)
				}
			}
			for i, e := range events {
				insertAsBefore(ctx, t, s, before.ID, int64(i+1), e)
			}
			if _, err := s.Append(ctx, now.ID, events); err != nil {
				t.Fatal(err)
			}
			if _, err := s.PutSubscription(ctx, &hub.Subscription{NodeID: now.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1/cb",
				State: hub.SubActive}); err != nil {
				t.Fatal(err)
			}

			read := func(nodeID int64) ([]hub.Event, []hub.Event) {
				got, err := s.EventsAfter(ctx, nodeID, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				items, err := s.Items(ctx, nodeID, nil, 0)
				if err != nil {
					t.Fatal(err)
				}
				return got, items
			}
			same := func(what string, a, b []hub.Event) {
				t.Helper()
				if len(a) != len(b) {
					t.Fatalf("%s: %d events, want %d", what, len(a), len(b))
				}
				for i := range a {
					x, y := a[i], b[i]
					x.NodeID, x.Created, y.NodeID, y.Created = 0, time.Time{}, 0, time.Time{}
					if !reflect.DeepEqual(x, y) {
						t.Errorf("%s %d:\n got  %+v\n want %+v", what, i, x, y)
					}
				}
			}
			oldLog, oldItems := read(before.ID)
			newLog, newItems := read(now.ID)
			same("log", newLog, oldLog)
			same("items", newItems, oldItems)
			if len(newItems) != 6 {
				t.Fatalf("%d items, want 6", len(newItems))
			}
			byID, err := s.Items(ctx, now.ID, []string{odd.ItemID, published.ItemID}, 0)
			if err != nil || len(byID) != 2 || byID[0].ItemID != published.ItemID || byID[1].Title != odd.Title {
				t.Fatalf("items by id: %+v, %v", byID, err)
			}
			if !bytes.Equal(newLog[0].Payload, entry.Payload) || newLog[0].Summary != entry.Summary ||
				!newLog[0].Updated.Equal(entry.Updated) || !newLog[2].Updated.Equal(odd.Updated.Truncate(time.Microsecond)) {
				t.Fatalf("first entry read back as %+v", newLog[0])
			}

			claim, err := s.ClaimNodeDeliveries(ctx, time.Now().Add(time.Minute), now.ID, 10, "me", time.Now().Add(time.Hour), 100, hub.EventSpan{})
			if err != nil || claim.Node == nil {
				t.Fatalf("claim: %+v, %v", claim, err)
			}
			same("claimed", claim.Events, oldLog)

			for i, packed := range wantPacked {
				var encoding, itemID, title, summary, link string
				var stored []byte
				if err := s.read.QueryRowContext(ctx, `SELECT encoding, item_id, title, summary, link, payload
					FROM events WHERE node_id = $1 AND seq = $2`, now.ID, i+1).Scan(&encoding, &itemID, &title, &summary, &link, &stored); err != nil {
					t.Fatal(err)
				}
				switch {
				case packed && (encoding != eventPackedV1 || itemID+title+summary+link != "" || len(stored) >= len(events[i].Payload)):
					t.Errorf("event %d: stored as %q (%q %q %q %q, %d bytes of %d); want packed and smaller",
						i+1, encoding, itemID, title, summary, link, len(stored), len(events[i].Payload))
				case !packed && encoding != eventAsIs:
					t.Errorf("event %d: stored as %q, want as it is", i+1, encoding)
				}
			}
		})
	}
}

// TestUnreadableEventIsAnError: a row in an encoding this binary does
// not know, or a damaged packed one, is an error, not an event.
func TestUnreadableEventIsAnError(t *testing.T) {
	good := packEvent(ptr(sampleEntry(1, 1)))
	cut, err := eventCodecEncode([]byte{3, 'a', 'b'})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		encoding string
		stored   []byte
	}{
		{"z9", good.payload},
		{eventPackedV1, []byte("not zstd at all")},
		{eventPackedV1, good.payload[:len(good.payload)-5]},
		{eventPackedV1, cut},
	} {
		e := hub.Event{Kind: hub.EventItem, Payload: bad.stored}
		if err := unpackEvent(&e, bad.encoding); !errors.Is(err, errEventEncoding) {
			t.Errorf("%q %x: %v, want errEventEncoding", bad.encoding, bad.stored, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// eventCodecEncode compresses text as packEvent does, for tests that
// craft a packed row.
func eventCodecEncode(text []byte) ([]byte, error) {
	codec, err := eventCodec()
	if err != nil {
		return nil, err
	}
	return codec.enc.EncodeAll(text, nil), nil
}

// FuzzUnpackEvent: whatever an events row holds, reading it gives an
// event or an error, never a panic nor more than maxEventTextBytes; and
// an item made of any text reads back as it was appended.
func FuzzUnpackEvent(f *testing.F) {
	e := sampleEntry(3, 40)
	f.Add(eventPackedV1, packEvent(&e).payload, e.Title, e.Payload)
	f.Add(eventAsIs, []byte("<entry/>"), "", []byte("<entry/>"))
	f.Add(eventPackedV1, []byte{0x28, 0xb5, 0x2f, 0xfd}, "x", []byte{0})
	f.Fuzz(func(t *testing.T, encoding string, stored []byte, title string, payload []byte) {
		e := hub.Event{Kind: hub.EventItem, Payload: stored}
		if err := unpackEvent(&e, encoding); err == nil && len(e.Payload) > maxEventTextBytes {
			t.Fatalf("decoded %d bytes, over the %d allowed", len(e.Payload), maxEventTextBytes)
		}
		in := hub.Event{Kind: hub.EventItem, ItemID: title + "-id", Title: title, Summary: title + title, Link: "https://example.org/" + title,
			Payload: payload, Updated: time.Unix(int64(len(payload)), 0).UTC()}
		st := packEvent(&in)
		out := hub.Event{Kind: hub.EventItem, ItemID: st.itemID, Title: st.title, Summary: st.summary, Link: st.link,
			Payload: st.payload, Updated: st.updated}
		if err := unpackEvent(&out, st.encoding); err != nil || !reflect.DeepEqual(out, in) {
			t.Fatalf("stored as %q: read back %+v, %v; want %+v", st.encoding, out, err, in)
		}
	})
}

// seededPackedEvent is the item the seeds from version 23 on hold packed
// (testdata/seed/*/0023.sql).
func seededPackedEvent() hub.Event {
	return hub.Event{Kind: hub.EventItem, ItemID: "https://example.org/packed", Title: "Packed entry", Summary: "Stored compressed, read back whole.",
		Link: "https://example.org/packed", Updated: time.Date(2031, 5, 6, 7, 45, 0, 0, time.UTC),
		Payload: []byte(`<entry xmlns="http://www.w3.org/2005/Atom"><id>https://example.org/packed</id><title type="text">Packed entry</title><link rel="alternate" href="https://example.org/packed"/><updated>2031-05-06T07:45:00Z</updated><summary type="html">Stored compressed, read back whole.</summary></entry>`)}
}
