package feed

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"
)

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func zlibBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func flateBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestCompression)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func TestDecodeContent(t *testing.T) {
	plain := []byte(strings.Repeat("hello feed ", 100))
	tests := []struct {
		name     string
		raw      []byte
		encoding string
		max      int64
		want     []byte
		wantErr  error
	}{
		{"identity", plain, "", 1 << 20, plain, nil},
		{"identity named", plain, "identity", 1 << 20, plain, nil},
		{"gzip", gzipBytes(t, plain), "gzip", 1 << 20, plain, nil},
		{"x-gzip", gzipBytes(t, plain), "x-gzip", 1 << 20, plain, nil},
		{"deflate zlib", zlibBytes(t, plain), "deflate", 1 << 20, plain, nil},
		{"deflate raw", flateBytes(t, plain), "deflate", 1 << 20, plain, nil},
		{"gzip then deflate", zlibBytes(t, gzipBytes(t, plain)), "gzip, deflate", 1 << 20, plain, nil},
		{"gzip bomb", gzipBytes(t, make([]byte, 4<<20)), "gzip", 1 << 20, nil, ErrBodyTooLarge},
		{"deflate bomb", zlibBytes(t, make([]byte, 4<<20)), "deflate", 1 << 20, nil, ErrBodyTooLarge},
		{"exactly the cap", gzipBytes(t, plain), "gzip", int64(len(plain)), plain, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeContent(tt.raw, tt.encoding, tt.max)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Errorf("decoded %d bytes, want %d", len(got), len(tt.want))
			}
		})
	}
	if _, err := decodeContent(plain, "br", 1<<20); err == nil {
		t.Error("unsupported encoding accepted")
	}
	if _, err := decodeContent([]byte("not gzip"), "gzip", 1<<20); err == nil {
		t.Error("corrupt gzip accepted")
	}
}

func latin1(t testing.TB, s string) []byte {
	t.Helper()
	b, err := charmap.ISO8859_1.NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestToUTF8(t *testing.T) {
	win1252, _ := charmap.Windows1252.NewEncoder().Bytes([]byte(`<rss version="2.0"><channel><title>“Smart” €</title></channel></rss>`))
	utf16, _ := unicode.UTF16(unicode.LittleEndian, unicode.UseBOM).NewEncoder().Bytes([]byte(`<?xml version="1.0" encoding="UTF-16"?><rss><channel><title>Grüße</title></channel></rss>`))
	tests := []struct {
		name      string
		body      []byte
		ctype     string
		wantBody  string
		wantCtype string
	}{
		{"utf-8 unchanged", []byte(`<?xml version="1.0" encoding="utf-8"?><a>é</a>`), "application/xml",
			`<?xml version="1.0" encoding="utf-8"?><a>é</a>`, "application/xml"},
		{"iso-8859-1 from the declaration", latin1(t, `<?xml version="1.0" encoding="ISO-8859-1"?><a>café</a>`), "application/rss+xml",
			`<?xml version="1.0" encoding="UTF-8"?><a>café</a>`, "application/rss+xml"},
		{"windows-1252 from Content-Type", win1252, "text/xml; charset=windows-1252",
			`<rss version="2.0"><channel><title>“Smart” €</title></channel></rss>`, "text/xml; charset=utf-8"},
		{"Content-Type wins over the declaration", latin1(t, `<?xml version="1.0" encoding="utf-8"?><a>ü</a>`), "text/xml; charset=iso-8859-1",
			`<?xml version="1.0" encoding="UTF-8"?><a>ü</a>`, "text/xml; charset=utf-8"},
		{"utf-8 BOM stripped", append([]byte{0xEF, 0xBB, 0xBF}, "<a>x</a>"...), "text/xml; charset=iso-8859-1",
			"<a>x</a>", "text/xml; charset=iso-8859-1"},
		{"utf-16 BOM", utf16, "application/xml",
			`<?xml version="1.0" encoding="UTF-8"?><rss><channel><title>Grüße</title></channel></rss>`, "application/xml"},
		{"unknown label left alone", []byte(`<?xml version="1.0" encoding="x-klingon"?><a/>`), "",
			`<?xml version="1.0" encoding="x-klingon"?><a/>`, ""},
		{"ascii declared us-ascii", []byte(`<?xml version="1.0" encoding="us-ascii"?><a/>`), "",
			`<?xml version="1.0" encoding="UTF-8"?><a/>`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, ct := toUTF8(tt.body, tt.ctype)
			if string(b) != tt.wantBody {
				t.Errorf("body %q, want %q", b, tt.wantBody)
			}
			if ct != tt.wantCtype {
				t.Errorf("content type %q, want %q", ct, tt.wantCtype)
			}
		})
	}
}

func TestLatin1FeedParsesAfterConversion(t *testing.T) {
	raw := latin1(t, `<?xml version="1.0" encoding="ISO-8859-1"?><rss version="2.0"><channel><title>Café</title><link>http://e.org/</link><description/><item><title>Crème brûlée</title><guid>1</guid></item></channel></rss>`)
	b, _ := toUTF8(raw, "application/rss+xml")
	d := mustParse(t, b, "http://e.org/f", fetchTime)
	if d.Title != "Café" || d.Entries[0].Title != "Crème brûlée" {
		t.Errorf("title %q entry %q", d.Title, d.Entries[0].Title)
	}
}

func FuzzDecodeBody(f *testing.F) {
	f.Add([]byte(`<?xml version="1.0" encoding="ISO-8859-1"?><a>caf`+"\xe9"+`</a>`), "", "text/xml")
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00}, "gzip", "application/rss+xml; charset=windows-1252")
	f.Add([]byte{0xFF, 0xFE, '<', 0, 'a', 0, '/', 0, '>', 0}, "deflate", "text/xml; charset=utf-16")
	f.Fuzz(func(t *testing.T, raw []byte, encoding, ctype string) {
		body, err := decodeContent(raw, encoding, 1<<16)
		if err != nil {
			return
		}
		if len(body) > 1<<16 {
			t.Fatalf("decoded %d bytes past the cap", len(body))
		}
		toUTF8(body, ctype)
	})
}

func FuzzHeaderHints(f *testing.F) {
	f.Add("public, max-age=600", "Sun, 10 Mar 2024 13:00:00 GMT", "120")
	f.Add(`max-age="60", no-cache`, "0", "Sun, 10 Mar 2024 15:00:00 GMT")
	f.Fuzz(func(t *testing.T, cc, expires, retryAfter string) {
		h := http.Header{}
		h.Set("Cache-Control", cc)
		h.Set("Expires", expires)
		h.Set("Retry-After", retryAfter)
		hints := headerHints(h, fetchTime)
		if hints.MaxAge < 0 || (!hints.Expires.IsZero() && !hints.Expires.After(fetchTime)) ||
			(!hints.RetryAfter.IsZero() && !hints.RetryAfter.After(fetchTime)) {
			t.Fatalf("hints %+v", hints)
		}
	})
}
