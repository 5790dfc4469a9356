package store

import (
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// A source's last body is stored compressed (migration 0022): the
// source_bodies row's encoding says how. Rows written before have none
// (stored as fetched) and stay readable; each is compressed when its
// source's representation next changes, so an upgrade rewrites nothing.
const (
	bodyAsFetched = ""
	bodyZstd      = "zstd"
)

// maxStoredBodyBytes bounds what a stored body may decode to (a body
// larger still is stored as fetched): above any document a fetch keeps
// (the fetcher's cap, 10 MiB unless raised), so that a damaged row costs
// at most that much memory to refuse.
const maxStoredBodyBytes = 64 << 20

// bodyCodec is made once, on the first body: EncodeAll and DecodeAll may
// be called concurrently. One encoder at the default level: about 2 MiB
// of tables, where SpeedBetterCompression took 20 MiB an encoder (one a
// CPU by default) to make a 23 KB feed 1 % smaller; changed fetches
// share it, at about 0.15 ms a feed.
var bodyCodec = sync.OnceValues(func() (codec struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}, err error) {
	codec.enc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return codec, err
	}
	codec.dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(maxStoredBodyBytes), zstd.WithDecoderMaxWindow(maxStoredBodyBytes))
	return codec, err
})

// errBodyEncoding is a stored body in an encoding this binary does not know.
var errBodyEncoding = errors.New("unknown body encoding")

// encodeBody is how body is stored: compressed, unless that does not
// make it smaller (an image, an archive), then as fetched.
func encodeBody(body []byte) (encoding string, stored []byte) {
	codec, err := bodyCodec()
	if err != nil || len(body) > maxStoredBodyBytes {
		return bodyAsFetched, body
	}
	packed := codec.enc.EncodeAll(body, make([]byte, 0, len(body)/3))
	if len(packed) >= len(body) {
		return bodyAsFetched, body
	}
	return bodyZstd, packed
}

// decodeBody reads a stored body back.
func decodeBody(encoding string, stored []byte) ([]byte, error) {
	switch encoding {
	case bodyAsFetched:
		return stored, nil
	case bodyZstd:
		codec, err := bodyCodec()
		if err != nil {
			return nil, fmt.Errorf("decompress body: %w", err)
		}
		body, err := codec.dec.DecodeAll(stored, nil)
		if err != nil {
			return nil, fmt.Errorf("decompress body: %w", err)
		}
		return body, nil
	default:
		return nil, fmt.Errorf("%w %q", errBodyEncoding, encoding)
	}
}
