package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/pingd/pingd/hub"
)

// An item event's text is stored compressed (migration 0023): its item
// id, title, summary, link, updated time and payload go into one zstd
// frame in the payload column, and those columns stay empty. The summary,
// title, link and id repeat text of the Atom entry in the payload, so in
// one frame they cost a few bytes each instead of a copy. The events
// row's encoding says how a row is stored; rows written before have none
// and are read as they are (an upgrade rewrites no event), as are events
// other than items and an item whose text packs no smaller.
const (
	eventAsIs = ""
	// eventPackedV1 is eventText's layout 1, compressed with eventDictV1.
	// Short: it is stored on every row.
	eventPackedV1 = "z1"
)

// eventDictV1 is the history a packed event's frame starts from (a zstd
// raw-content dictionary): the markup of an Atom entry as the feed parser
// and CompleteEntry write it, so that a row of about a kilobyte does not
// pay for its tags the first time it names them. The most common strings
// come last, where references to them are cheapest. Rows of eventPackedV1
// are decoded with these bytes: they never change (TestEventDictFixed);
// another dictionary is another encoding.
const eventDictV1 = `<?xml version="1.0" encoding="UTF-8"?>` +
	`<entry xmlns="http://www.w3.org/2005/Atom" xmlns:media="http://search.yahoo.com/mrss/">` +
	`<id>tag:</id><id>urn:uuid:</id><title type="html"></title>` +
	`<author><name></name><email></email><uri>https://</uri></author><contributor><name></name></contributor>` +
	`<category term="" scheme="https://" label=""/><category term="` +
	`<link rel="enclosure" type="audio/mpeg" length="" href="https://www.` +
	`<link rel="enclosure" type="image/jpeg" href="https://` +
	`<link rel="replies" type="text/html" href="https://` +
	`<link rel="alternate" type="text/html" href="https://www.` +
	`<content type="text/html" src="https://` +
	`<content type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml"><p></p></div></content>` +
	`&lt;p&gt;&lt;/p&gt;&lt;a href=&quot;https://&quot;&gt;&lt;/a&gt;&lt;br /&gt;&lt;img src=&quot;&quot; alt=&quot;&quot; /&gt;` +
	`&lt;/p&gt;&lt;p&gt;&lt;em&gt;&lt;/em&gt;&lt;strong&gt;&lt;/strong&gt;&lt;li&gt;&lt;/li&gt;&lt;/ul&gt;` +
	`<rights></rights><source><id></id><title></title></source>` +
	`<published>2026-</published><updated>2026-01-01T00:00:00Z</updated>` +
	`<content type="text"></content><content type="html"></content><summary type="text"></summary>` +
	`<summary type="html"></summary></entry>` +
	`<entry xmlns="http://www.w3.org/2005/Atom"><id>http://</id><title type="text"></title>` +
	`<link rel="alternate" href="http://</link><updated>`

// eventDictID names eventDictV1 in its frames.
const eventDictID = 1

// maxEventTextBytes bounds what a packed event may decode to: above any
// payload an event carries (hub.MaxEntryPayloadBytes, and a stanza's
// limit for what owners publish), so that a damaged row costs at most
// that much memory to refuse.
const maxEventTextBytes = 16 << 20

// eventCodec is made once, on the first packed event: EncodeAll and
// DecodeAll may be called concurrently. One encoder at the fastest level:
// with a dictionary the default level spends about 70 µs an event on
// its tables for a row 2 % smaller, the fastest 20 µs (an append packs
// each event it writes).
var eventCodec = sync.OnceValues(func() (codec struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}, err error) {
	dict := []byte(eventDictV1)
	codec.enc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderDictRaw(eventDictID, dict))
	if err != nil {
		return codec, err
	}
	codec.dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderDictRaw(eventDictID, dict),
		zstd.WithDecoderMaxMemory(maxEventTextBytes), zstd.WithDecoderMaxWindow(maxEventTextBytes))
	return codec, err
})

// errEventEncoding is a stored event in an encoding this binary does not
// know, or a packed one that does not read as one.
var errEventEncoding = errors.New("unreadable stored event")

// storedEvent is an events row's text columns as stored.
type storedEvent struct {
	encoding               string
	itemID, title, summary string
	link                   string
	payload                []byte
	updated                time.Time // zero: NULL
}

// packEvent is how e's text is stored: packed when e is an item with a
// payload and packing makes it smaller, else every column as it is. An
// updated time is packed only when its column would read it back the
// same (a year SQLite stores as it is); any other stays in the column.
func packEvent(e *hub.Event) storedEvent {
	asIs := storedEvent{encoding: eventAsIs, itemID: e.ItemID, title: e.Title, summary: e.Summary, link: e.Link,
		payload: e.Payload, updated: e.Updated}
	updated := dbTimeOf(e.Updated)
	if e.Kind != hub.EventItem || len(e.Payload) == 0 || len(e.Payload) > maxEventTextBytes/2 ||
		(!updated.IsZero() && (updated.Year() < 1 || updated.Year() > 9999)) {
		return asIs
	}
	codec, err := eventCodec()
	if err != nil {
		return asIs
	}
	var updatedText string
	if !updated.IsZero() {
		updatedText = updated.Format(time.RFC3339Nano)
	}
	// Layout 1: the payload, then the item id, title, summary, link and
	// updated time (RFC 3339, UTC; empty for none), each after its length
	// (a uvarint). The payload first: the copies after it refer back to
	// its text.
	text := make([]byte, 0, len(e.ItemID)+len(e.Title)+len(e.Summary)+len(e.Link)+len(updatedText)+len(e.Payload)+6*binary.MaxVarintLen32)
	for _, field := range [][]byte{e.Payload, []byte(e.ItemID), []byte(e.Title), []byte(e.Summary), []byte(e.Link), []byte(updatedText)} {
		text = binary.AppendUvarint(text, uint64(len(field)))
		text = append(text, field...)
	}
	if len(text) > maxEventTextBytes {
		return asIs
	}
	packed := codec.enc.EncodeAll(text, make([]byte, 0, len(text)/2))
	if len(packed) >= len(text) {
		return asIs
	}
	return storedEvent{encoding: eventPackedV1, payload: packed}
}

// unpackEvent fills e's text from a row stored by packEvent; a row stored
// as it is was scanned into e already.
func unpackEvent(e *hub.Event, encoding string) error {
	switch encoding {
	case eventAsIs:
		return nil
	case eventPackedV1:
	default:
		return fmt.Errorf("event %d of node %d: %w: encoding %q", e.Seq, e.NodeID, errEventEncoding, encoding)
	}
	codec, err := eventCodec()
	if err != nil {
		return fmt.Errorf("event %d of node %d: %w", e.Seq, e.NodeID, err)
	}
	text, err := codec.dec.DecodeAll(e.Payload, nil)
	if err != nil {
		return fmt.Errorf("event %d of node %d: %w: %w", e.Seq, e.NodeID, errEventEncoding, err)
	}
	var fields [6][]byte
	for i := range fields {
		n, size := binary.Uvarint(text)
		if size <= 0 || n > uint64(len(text)-size) {
			return fmt.Errorf("event %d of node %d: %w: field %d cut short", e.Seq, e.NodeID, errEventEncoding, i)
		}
		fields[i] = text[size : size+int(n) : size+int(n)]
		text = text[size+int(n):]
	}
	if len(text) != 0 {
		return fmt.Errorf("event %d of node %d: %w: %d bytes after its fields", e.Seq, e.NodeID, errEventEncoding, len(text))
	}
	var updated time.Time
	if len(fields[5]) > 0 {
		t, err := time.Parse(time.RFC3339Nano, string(fields[5]))
		if err != nil {
			return fmt.Errorf("event %d of node %d: %w: %w", e.Seq, e.NodeID, errEventEncoding, err)
		}
		updated = t.UTC()
	}
	e.Payload = fields[0]
	e.ItemID, e.Title, e.Summary, e.Link = string(fields[1]), string(fields[2]), string(fields[3]), string(fields[4])
	e.Updated = updated
	return nil
}
