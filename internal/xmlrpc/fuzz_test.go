package xmlrpc

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func addSpecSeeds(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "spec", "*.xml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// comparable maps a decoded value to what survives encoding: times lose
// their zone and fractions of a second.
func comparable(v any) any {
	switch x := v.(type) {
	case time.Time:
		return x.UTC().Truncate(time.Second)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = comparable(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = comparable(e)
		}
		return out
	}
	return v
}

// FuzzDecodeCall checks that no input crashes the decoder and that every
// call it accepts survives an encode/decode round trip.
func FuzzDecodeCall(f *testing.F) {
	addSpecSeeds(f)
	f.Fuzz(func(t *testing.T, doc []byte) {
		lim := Limits{MaxBytes: 64 << 10}
		call, err := DecodeCall(bytes.NewReader(doc), lim)
		if err != nil {
			if !IsDecodeError(err) {
				t.Fatalf("error is not a decode error: %v", err)
			}
			return
		}
		enc, err := MarshalCall(call.Method, call.Params...)
		if err != nil {
			t.Fatalf("cannot encode a decoded call: %v", err)
		}
		again, err := DecodeCall(bytes.NewReader(enc), Limits{})
		if err != nil {
			t.Fatalf("cannot decode an encoded call: %v\n%s", err, enc)
		}
		if again.Method != call.Method || !reflect.DeepEqual(comparable(again.Params), comparable(call.Params)) {
			t.Fatalf("round trip changed the call:\n%#v\n%#v", call, again)
		}
	})
}

// FuzzDecodeResponse does the same for responses and faults.
func FuzzDecodeResponse(f *testing.F) {
	addSpecSeeds(f)
	f.Fuzz(func(t *testing.T, doc []byte) {
		lim := Limits{MaxBytes: 64 << 10}
		v, err := DecodeResponse(bytes.NewReader(doc), lim)
		var fault *Fault
		switch {
		case errors.As(err, &fault):
			_, err := DecodeResponse(bytes.NewReader(MarshalFault(fault)), Limits{})
			var again *Fault
			if !errors.As(err, &again) || *again != *fault {
				t.Fatalf("fault round trip: %v, want %v", err, fault)
			}
			return
		case err != nil:
			if !IsDecodeError(err) {
				t.Fatalf("error is not a decode error: %v", err)
			}
			return
		}
		enc, err := MarshalResponse(v)
		if err != nil {
			t.Fatalf("cannot encode a decoded response: %v", err)
		}
		again, err := DecodeResponse(bytes.NewReader(enc), Limits{})
		if err != nil {
			t.Fatalf("cannot decode an encoded response: %v\n%s", err, enc)
		}
		if !reflect.DeepEqual(comparable(again), comparable(v)) {
			t.Fatalf("round trip changed the response:\n%#v\n%#v", v, again)
		}
	})
}
