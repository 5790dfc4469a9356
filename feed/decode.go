package feed

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"mime"
	"regexp"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding/unicode"
)

// ErrBodyTooLarge is returned when a body, compressed or decompressed, is
// larger than the fetcher's MaxBodyBytes.
var ErrBodyTooLarge = errors.New("body too large")

// readCapped reads r up to max bytes; more is ErrBodyTooLarge.
func readCapped(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return b, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, max)
	}
	return b, nil
}

// decodeContent undoes the Content-Encoding of raw (gzip, deflate,
// identity, in the order they were applied), refusing results larger than
// max so that a small compressed body cannot expand without bound.
func decodeContent(raw []byte, contentEncoding string, max int64) ([]byte, error) {
	var codings []string
	for c := range strings.SplitSeq(contentEncoding, ",") {
		if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
			codings = append(codings, c)
		}
	}
	body := raw
	for i := len(codings) - 1; i >= 0; i-- {
		var (
			out []byte
			err error
		)
		switch codings[i] {
		case "gzip", "x-gzip":
			out, err = gunzip(body, max)
		case "deflate":
			out, err = inflate(body, max)
		default:
			return nil, fmt.Errorf("unsupported content encoding %q", codings[i])
		}
		if err != nil {
			return nil, err
		}
		body = out
	}
	return body, nil
}

func gunzip(b []byte, max int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	defer zr.Close()
	out, err := readCapped(zr, max)
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return out, nil
}

// inflate decodes HTTP "deflate": zlib-wrapped as RFC 9110 says, or raw
// DEFLATE as some servers send it.
func inflate(b []byte, max int64) ([]byte, error) {
	if zr, err := zlib.NewReader(bytes.NewReader(b)); err == nil {
		defer zr.Close()
		out, err := readCapped(zr, max)
		switch {
		case err == nil:
			return out, nil
		case errors.Is(err, ErrBodyTooLarge):
			return nil, fmt.Errorf("deflate: %w", err)
		}
	}
	fr := flate.NewReader(bytes.NewReader(b))
	defer fr.Close()
	out, err := readCapped(fr, max)
	if err != nil {
		return nil, fmt.Errorf("deflate: %w", err)
	}
	return out, nil
}

var (
	xmlDeclEncoding = regexp.MustCompile(`^\s*<\?xml[^>]*?\sencoding\s*=\s*["']([A-Za-z0-9._:-]+)["']`)
	utf8BOM         = []byte{0xEF, 0xBB, 0xBF}
)

// toUTF8 converts body to UTF-8. The encoding is taken, as RFC 7303 orders
// it, from a byte order mark, else the Content-Type charset, else the XML
// declaration. A converted document's XML declaration and Content-Type
// charset are rewritten to say UTF-8, so the body can be parsed and stored
// as it is. An unknown encoding leaves the body unchanged.
func toUTF8(body []byte, contentType string) ([]byte, string) {
	switch {
	case bytes.HasPrefix(body, utf8BOM):
		return body[len(utf8BOM):], contentType
	case bytes.HasPrefix(body, []byte{0xFF, 0xFE}), bytes.HasPrefix(body, []byte{0xFE, 0xFF}):
		dec := unicode.UTF16(unicode.BigEndian, unicode.ExpectBOM).NewDecoder()
		if out, err := dec.Bytes(body); err == nil {
			return rewriteDeclaredEncoding(out), withUTF8Charset(contentType)
		}
		return body, contentType
	}
	label := ""
	if _, params, err := mime.ParseMediaType(contentType); err == nil {
		label = params["charset"]
	}
	if label == "" {
		if m := xmlDeclEncoding.FindSubmatch(body[:min(len(body), 512)]); m != nil {
			label = string(m[1])
		}
	}
	label = strings.ToLower(strings.TrimSpace(label))
	if label == "" || label == "utf-8" || label == "utf8" {
		return body, contentType
	}
	enc, name := charset.Lookup(label)
	if enc == nil {
		return body, contentType
	}
	if name == "utf-8" {
		return body, contentType
	}
	// US-ASCII is labelled windows-1252 by WHATWG; pure ASCII needs nothing.
	if isASCII(body) {
		return rewriteDeclaredEncoding(body), withUTF8Charset(contentType)
	}
	out, err := enc.NewDecoder().Bytes(body)
	if err != nil || !utf8.Valid(out) {
		return body, contentType
	}
	return rewriteDeclaredEncoding(out), withUTF8Charset(contentType)
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// rewriteDeclaredEncoding makes an XML declaration say UTF-8.
func rewriteDeclaredEncoding(body []byte) []byte {
	loc := xmlDeclEncoding.FindSubmatchIndex(body[:min(len(body), 512)])
	if loc == nil {
		return body
	}
	out := make([]byte, 0, len(body))
	out = append(out, body[:loc[2]]...)
	out = append(out, "UTF-8"...)
	out = append(out, body[loc[3]:]...)
	return out
}

func withUTF8Charset(contentType string) string {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || params["charset"] == "" {
		return contentType
	}
	params["charset"] = "utf-8"
	return mime.FormatMediaType(mt, params)
}
