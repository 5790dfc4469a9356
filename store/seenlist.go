package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// A source's seen entry ids are one row of seen (migration 0026), not a
// row each: the ids with the time each was last shown, in one value,
// compressed. Rows of 20 URLs took about 2 KiB on SQLite and 3.5 KiB on
// PostgreSQL (an index entry and a tuple header each); the list of the
// same ids is a few hundred bytes.
//
// The stored value is a format byte and the list:
//
//	seenPlain or seenZstd (then the rest is one zstd frame of the list)
//	uvarint number of distinct times, the newest first; the first as a
//	  varint of Unix microseconds, each next one as a uvarint of how much
//	  older it is
//	uvarint number of ids, then each id in byte order: uvarint index of
//	  its time, uvarint length of the prefix it shares with the id before,
//	  uvarint length of the rest, the rest
//
// Sorted ids share most of their bytes with the one before (URLs of one
// site), and what is left compresses well.
const (
	seenPlain byte = 1
	seenZstd  byte = 2
)

// maxSeenListBytes bounds what a stored list may decode to, its ids
// counted whole: a source keeps the ids its document shows (at most what
// a fetched document holds) and hub.MaxHiddenSeen more, far below this.
const maxSeenListBytes = 64 << 20

// errSeenList is a stored list that does not decode.
var errSeenList = errors.New("damaged seen id list")

// seenList is a source's seen entry ids, each with the time (Unix
// microseconds, the database's precision) a fetch last showed it.
type seenList map[string]int64

// seenEncoder is made once: a frame without a checksum (the database
// keeps its own), 4 bytes fewer on a list of a few hundred.
var seenEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(false))
})

// seenMicros is t as a list keeps it.
func seenMicros(t time.Time) int64 { return dbTimeOf(t).UnixMicro() }

// show records that a fetch at `at` showed ids; it returns those the
// list did not hold (never seen, or forgotten since).
func (l seenList) show(ids []string, at int64) map[string]bool {
	fresh := make(map[string]bool)
	for _, id := range ids {
		if _, ok := l[id]; !ok {
			fresh[id] = true
		}
		l[id] = at
	}
	return fresh
}

// keepHidden keeps, of the ids last shown before `shown`, those shown
// last, as many as keep allows (hub.HiddenSeenKept). Ids shown by one
// fetch share a time and go together: the first id beyond the bound
// takes those of its fetch with it.
func (l seenList) keepHidden(shown int64, keep int) {
	var hidden []int64
	for _, at := range l {
		if at < shown {
			hidden = append(hidden, at)
		}
	}
	if len(hidden) <= keep {
		return
	}
	slices.Sort(hidden)
	cut := hidden[len(hidden)-1-keep] // the newest time beyond the bound
	for id, at := range l {
		if at <= cut {
			delete(l, id)
		}
	}
}

// forgetBefore drops the ids last shown before cut and counts them.
func (l seenList) forgetBefore(cut int64) int {
	n := 0
	for id, at := range l {
		if at < cut {
			delete(l, id)
			n++
		}
	}
	return n
}

// span is the time between the oldest and the newest id of the list, in
// whole seconds rounded up (at most what an INTEGER column holds): the
// seen row keeps it so that ForgetSeenEntries reads only the lists that
// hold ids old enough to forget.
func (l seenList) span() int64 {
	if len(l) == 0 {
		return 0
	}
	oldest, newest := l.bounds()
	micros := uint64(newest) - uint64(oldest) // no overflow for any pair
	return int64(min((micros+999_999)/1_000_000, math.MaxInt32))
}

// bounds are the times of the list's oldest and newest ids (of an empty
// list, MaxInt64 and MinInt64).
func (l seenList) bounds() (oldest, newest int64) {
	oldest, newest = math.MaxInt64, math.MinInt64
	for _, at := range l {
		oldest, newest = min(oldest, at), max(newest, at)
	}
	return oldest, newest
}

// encode is the list as stored: compressed, unless that is no smaller.
func (l seenList) encode() []byte {
	ids := make([]string, 0, len(l))
	var times []int64
	for id, at := range l {
		ids = append(ids, id)
		times = append(times, at)
	}
	slices.Sort(ids)
	slices.Sort(times)
	times = slices.Compact(times)
	slices.Reverse(times)
	index := make(map[int64]uint64, len(times))
	for i, at := range times {
		index[at] = uint64(i)
	}
	out := []byte{seenPlain}
	out = binary.AppendUvarint(out, uint64(len(times)))
	for i, at := range times {
		if i == 0 {
			out = binary.AppendVarint(out, at)
		} else {
			out = binary.AppendUvarint(out, uint64(times[i-1])-uint64(at))
		}
	}
	out = binary.AppendUvarint(out, uint64(len(ids)))
	prev := ""
	for _, id := range ids {
		shared := commonPrefix(prev, id)
		out = binary.AppendUvarint(out, index[l[id]])
		out = binary.AppendUvarint(out, uint64(shared))
		out = binary.AppendUvarint(out, uint64(len(id)-shared))
		out = append(out, id[shared:]...)
		prev = id
	}
	enc, err := seenEncoder()
	if err != nil {
		return out
	}
	packed := enc.EncodeAll(out[1:], append(make([]byte, 0, len(out)/2), seenZstd))
	if len(packed) >= len(out) {
		return out
	}
	return packed
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// decodeSeenList reads a stored list back; an empty value is an empty
// list.
func decodeSeenList(stored []byte) (seenList, error) {
	if len(stored) == 0 {
		return seenList{}, nil
	}
	raw := stored[1:]
	switch stored[0] {
	case seenPlain:
	case seenZstd:
		codec, err := bodyCodec()
		if err != nil {
			return nil, fmt.Errorf("decompress seen ids: %w", err)
		}
		if raw, err = codec.dec.DecodeAll(raw, nil); err != nil {
			return nil, fmt.Errorf("%w: %w", errSeenList, err)
		}
	default:
		return nil, fmt.Errorf("%w: format %d", errSeenList, stored[0])
	}
	r := seenReader{b: raw}
	nTimes := r.count()
	times := make([]int64, 0, nTimes)
	for i := range nTimes {
		if i == 0 {
			times = append(times, r.varint())
		} else {
			times = append(times, times[i-1]-int64(r.uvarint()))
		}
	}
	nIDs := r.count()
	l := make(seenList, nIDs)
	prev := ""
	total := 0
	for range nIDs {
		ti, shared, rest := r.uvarint(), r.uvarint(), r.uvarint()
		if r.err != nil {
			break
		}
		if ti >= uint64(len(times)) || shared > uint64(len(prev)) || rest > uint64(len(r.b)) {
			return nil, fmt.Errorf("%w: id %d out of bounds", errSeenList, len(l))
		}
		id := prev[:shared] + string(r.b[:rest])
		r.b = r.b[rest:]
		if total += len(id); total > maxSeenListBytes {
			return nil, fmt.Errorf("%w: over %d bytes of ids", errSeenList, maxSeenListBytes)
		}
		if len(l) > 0 && id <= prev {
			return nil, fmt.Errorf("%w: ids out of order", errSeenList)
		}
		l[id] = times[ti]
		prev = id
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the ids", errSeenList, len(r.b))
	}
	return l, nil
}

// seenReader reads the numbers of a list, keeping the first error.
type seenReader struct {
	b   []byte
	err error
}

func (r *seenReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: a number cut short", errSeenList)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *seenReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: a number cut short", errSeenList)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a number of things that each take at least one byte of
// what is left, so that a damaged count cannot ask for more memory than
// the value itself.
func (r *seenReader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		if r.err == nil {
			r.err = fmt.Errorf("%w: a count of %d in %d bytes", errSeenList, n, len(r.b))
		}
		return 0
	}
	return int(n)
}

// moveSeenIntoLists is the data step of migration 0026: each source's
// rows of seen_rows (an id and its time each) become its list in seen,
// a few hundred sources at a time, and seen_rows goes.
func moveSeenIntoLists(ctx context.Context, tx *txn) error {
	var sources []int64
	rows, err := tx.QueryContext(ctx, `SELECT DISTINCT source_id FROM seen_rows ORDER BY source_id`)
	if err != nil {
		return fmt.Errorf("sources with seen ids: %w", err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		sources = append(sources, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	const batch = 256
	for len(sources) > 0 {
		some := sources[:min(batch, len(sources))]
		sources = sources[len(some):]
		lists := make(map[int64]seenList, len(some))
		rows, err := tx.QueryContext(ctx, `SELECT source_id, entry_id, seen_at FROM seen_rows
			WHERE source_id >= $1 AND source_id <= $2`, some[0], some[len(some)-1])
		if err != nil {
			return fmt.Errorf("seen ids: %w", err)
		}
		for rows.Next() {
			var source int64
			var id string
			var at time.Time
			if err := rows.Scan(&source, &id, tc(&at)); err != nil {
				rows.Close()
				return err
			}
			if lists[source] == nil {
				lists[source] = seenList{}
			}
			lists[source][id] = seenMicros(at)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, group := range chunks(some) {
			var values strings.Builder
			args := make([]any, 0, 4*len(group))
			for i, source := range group {
				if i > 0 {
					values.WriteString(", ")
				}
				fmt.Fprintf(&values, "($%d, $%d, $%d, $%d)", 4*i+1, 4*i+2, 4*i+3, 4*i+4)
				list := lists[source]
				args = append(args, source, list.span(), len(list), list.encode())
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO seen (source_id, span_seconds, id_count, ids) VALUES `+values.String(), args...); err != nil {
				return fmt.Errorf("store seen id lists: %w", err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `DROP TABLE seen_rows`); err != nil {
		return fmt.Errorf("drop the seen rows: %w", err)
	}
	return nil
}
