package xmlrpc

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"time"
)

const xmlHeader = `<?xml version="1.0" encoding="UTF-8"?>` + "\n"

// MarshalCall encodes a <methodCall> of method with params.
func MarshalCall(method string, params ...any) ([]byte, error) {
	if !ValidMethodName(method) {
		return nil, fmt.Errorf("encode call: invalid method name %q", method)
	}
	var b bytes.Buffer
	b.WriteString(xmlHeader)
	b.WriteString("<methodCall><methodName>")
	b.WriteString(method)
	b.WriteString("</methodName><params>")
	for i, p := range params {
		b.WriteString("<param>")
		if err := writeValue(&b, p, 1); err != nil {
			return nil, fmt.Errorf("encode call %s: parameter %d: %w", method, i+1, err)
		}
		b.WriteString("</param>")
	}
	b.WriteString("</params></methodCall>\n")
	return b.Bytes(), nil
}

// MarshalResponse encodes a <methodResponse> carrying v.
func MarshalResponse(v any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(xmlHeader)
	b.WriteString("<methodResponse><params><param>")
	if err := writeValue(&b, v, 1); err != nil {
		return nil, fmt.Errorf("encode response: %w", err)
	}
	b.WriteString("</param></params></methodResponse>\n")
	return b.Bytes(), nil
}

// MarshalFault encodes a <methodResponse> carrying the fault.
func MarshalFault(f *Fault) []byte {
	var b bytes.Buffer
	b.WriteString(xmlHeader)
	b.WriteString("<methodResponse><fault><value><struct>")
	b.WriteString("<member><name>faultCode</name><value><int>")
	b.WriteString(strconv.Itoa(int(int32(f.Code))))
	b.WriteString("</int></value></member>")
	b.WriteString("<member><name>faultString</name><value><string>")
	escape(&b, f.Message)
	b.WriteString("</string></value></member>")
	b.WriteString("</struct></value></fault></methodResponse>\n")
	return b.Bytes()
}

// dateTimeLayout is the specification's form; it carries no zone, so
// times are written in UTC.
const dateTimeLayout = "20060102T15:04:05"

func writeValue(b *bytes.Buffer, v any, depth int) error {
	if depth > DefaultMaxDepth {
		return fmt.Errorf("nested deeper than %d", DefaultMaxDepth)
	}
	b.WriteString("<value>")
	if err := writeContent(b, v, depth); err != nil {
		return err
	}
	b.WriteString("</value>")
	return nil
}

// writeContent writes the typed element inside a <value>.
func writeContent(b *bytes.Buffer, v any, depth int) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("<nil/>")
	case string:
		b.WriteString("<string>")
		escape(b, x)
		b.WriteString("</string>")
	case bool:
		if x {
			b.WriteString("<boolean>1</boolean>")
		} else {
			b.WriteString("<boolean>0</boolean>")
		}
	case []byte:
		b.WriteString("<base64>")
		b.WriteString(base64.StdEncoding.EncodeToString(x))
		b.WriteString("</base64>")
	case time.Time:
		b.WriteString("<dateTime.iso8601>")
		b.WriteString(x.UTC().Format(dateTimeLayout))
		b.WriteString("</dateTime.iso8601>")
	case map[string]any:
		return writeStruct(b, func(yield func(string, any) error) error {
			for _, k := range slices.Sorted(maps.Keys(x)) {
				if err := yield(k, x[k]); err != nil {
					return err
				}
			}
			return nil
		}, depth)
	case []any:
		b.WriteString("<array><data>")
		for _, e := range x {
			if err := writeValue(b, e, depth+1); err != nil {
				return err
			}
		}
		b.WriteString("</data></array>")
	default:
		return writeReflect(b, reflect.ValueOf(v), depth)
	}
	return nil
}

// writeReflect encodes the numeric kinds and other slices and
// string-keyed maps.
func writeReflect(b *bytes.Buffer, rv reflect.Value, depth int) error {
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := rv.Int()
		if n < math.MinInt32 || n > math.MaxInt32 {
			return fmt.Errorf("integer %d is outside the XML-RPC int range", n)
		}
		b.WriteString("<int>" + strconv.FormatInt(n, 10) + "</int>")
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n := rv.Uint()
		if n > math.MaxInt32 {
			return fmt.Errorf("integer %d is outside the XML-RPC int range", n)
		}
		b.WriteString("<int>" + strconv.FormatUint(n, 10) + "</int>")
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("%v has no XML-RPC double form", f)
		}
		b.WriteString("<double>" + strconv.FormatFloat(f, 'f', -1, 64) + "</double>")
	case reflect.String:
		b.WriteString("<string>")
		escape(b, rv.String())
		b.WriteString("</string>")
	case reflect.Bool:
		return writeContent(b, rv.Bool(), depth)
	case reflect.Slice, reflect.Array:
		b.WriteString("<array><data>")
		for i := range rv.Len() {
			if err := writeValue(b, rv.Index(i).Interface(), depth+1); err != nil {
				return err
			}
		}
		b.WriteString("</data></array>")
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return fmt.Errorf("a %s has no XML-RPC form (struct keys must be strings)", rv.Type())
		}
		keys := make([]string, 0, rv.Len())
		for _, k := range rv.MapKeys() {
			keys = append(keys, k.String())
		}
		slices.Sort(keys)
		return writeStruct(b, func(yield func(string, any) error) error {
			for _, k := range keys {
				kv := reflect.ValueOf(k).Convert(rv.Type().Key())
				if err := yield(k, rv.MapIndex(kv).Interface()); err != nil {
					return err
				}
			}
			return nil
		}, depth)
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			b.WriteString("<nil/>")
			return nil
		}
		return writeContent(b, rv.Elem().Interface(), depth)
	default:
		if !rv.IsValid() {
			b.WriteString("<nil/>")
			return nil
		}
		return fmt.Errorf("a %s has no XML-RPC form", rv.Type())
	}
	return nil
}

func writeStruct(b *bytes.Buffer, members func(yield func(string, any) error) error, depth int) error {
	b.WriteString("<struct>")
	err := members(func(name string, v any) error {
		b.WriteString("<member><name>")
		escape(b, name)
		b.WriteString("</name>")
		if err := writeValue(b, v, depth+1); err != nil {
			return fmt.Errorf("member %q: %w", name, err)
		}
		b.WriteString("</member>")
		return nil
	})
	if err != nil {
		return err
	}
	b.WriteString("</struct>")
	return nil
}

// escape writes s as XML character data. Characters XML cannot carry
// become U+FFFD (encoding/xml's rule).
func escape(b *bytes.Buffer, s string) {
	_ = xml.EscapeText(b, []byte(s))
}
