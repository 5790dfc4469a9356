package xmlrpc

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func readSpec(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "spec", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeSeedPings(t *testing.T) {
	tests := []struct {
		file   string
		method string
		params []any
	}{
		{"weblogupdates-ping.xml", "weblogUpdates.ping", []any{"The RSS Blog", "https://rssweblog.com/"}},
		{"weblogupdates-extendedping.xml", "weblogUpdates.extendedPing", []any{
			"The RSS Blog", "https://rssweblog.com/", "https://rssweblog.com/",
			"http://feeds.feedburner.com/TheRssBlog", "rss|opml",
		}},
		{"rsscloud-pleasenotify.xml", "xmlStorageSystem.rssPleaseNotify", []any{
			"myCloud.notify", 5337, "/RPC2", "xml-rpc",
			[]any{"http://example.org/index.xml", "http://example.org/other.xml"},
		}},
		{"rsscloud-notify.xml", "myCloud.notify", []any{"http://example.org/index.xml"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			call, err := DecodeCall(bytes.NewReader(readSpec(t, tt.file)), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if call.Method != tt.method {
				t.Errorf("method = %q, want %q", call.Method, tt.method)
			}
			if !reflect.DeepEqual(call.Params, tt.params) {
				t.Errorf("params = %#v\nwant %#v", call.Params, tt.params)
			}
			// Round trip: what we encode decodes to the same call.
			enc, err := MarshalCall(call.Method, call.Params...)
			if err != nil {
				t.Fatal(err)
			}
			again, err := DecodeCall(bytes.NewReader(enc), Limits{})
			if err != nil {
				t.Fatalf("re-decode: %v\n%s", err, enc)
			}
			if !reflect.DeepEqual(again, call) {
				t.Errorf("round trip = %#v, want %#v", again, call)
			}
		})
	}
}

func TestDecodeSeedResponse(t *testing.T) {
	v, err := DecodeResponse(bytes.NewReader(readSpec(t, "weblogupdates-response.xml")), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"flerror": false, "message": "Your ping succeeded!"}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("response = %#v, want %#v", v, want)
	}
	enc, err := MarshalResponse(v)
	if err != nil {
		t.Fatal(err)
	}
	again, err := DecodeResponse(bytes.NewReader(enc), Limits{})
	if err != nil || !reflect.DeepEqual(again, want) {
		t.Fatalf("round trip = %#v, %v", again, err)
	}
	ok, err := DecodeBoolResponse(bytes.NewReader(readSpec(t, "rsscloud-true.xml")), Limits{})
	if err != nil || !ok {
		t.Fatalf("rssCloud true = %v, %v", ok, err)
	}
	if _, err := DecodeBoolResponse(bytes.NewReader(enc), Limits{}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("struct as boolean: err = %v, want ErrMalformed", err)
	}
}

func TestEveryType(t *testing.T) {
	call, err := DecodeCall(bytes.NewReader(readSpec(t, "every-type-call.xml")), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		41, -12, true, "Hello & <world>", -12.5,
		time.Date(2007, 1, 13, 19, 8, 0, 0, time.UTC),
		[]byte("pingd delta"),
		map[string]any{"port": 5337, "path": "/RPC2"},
		[]any{7, "feed", false, 0.25},
		nil,
		"",
	}
	if !reflect.DeepEqual(call.Params, want) {
		t.Fatalf("params = %#v\nwant %#v", call.Params, want)
	}
	enc, err := MarshalCall(call.Method, call.Params...)
	if err != nil {
		t.Fatal(err)
	}
	again, err := DecodeCall(bytes.NewReader(enc), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Params, want) {
		t.Fatalf("round trip = %#v", again.Params)
	}
}

func value(inner string) string {
	return `<?xml version="1.0"?><methodCall><methodName>m</methodName><params><param><value>` +
		inner + `</value></param></params></methodCall>`
}

func TestDecodeValues(t *testing.T) {
	tests := []struct {
		name  string
		inner string
		want  any
	}{
		{"bare text keeps spaces", "  two words ", "  two words "},
		{"string", "<string> x </string>", " x "},
		{"empty string element", "<string/>", ""},
		{"typed with spaces around", "\n <i4>7</i4>\n ", 7},
		{"int plus sign", "<int>+42</int>", 42},
		{"int max", "<int>2147483647</int>", math.MaxInt32},
		{"int min", "<int>-2147483648</int>", math.MinInt32},
		{"boolean 0", "<boolean>0</boolean>", false},
		{"boolean true word", "<boolean>true</boolean>", true},
		{"double", "<double>3.5</double>", 3.5},
		{"double exponent", "<double>1e3</double>", 1000.0},
		{"date dashed", "<dateTime.iso8601>2007-01-13T19:08:00</dateTime.iso8601>", time.Date(2007, 1, 13, 19, 8, 0, 0, time.UTC)},
		{"date zoned", "<dateTime.iso8601>2007-01-13T19:08:00Z</dateTime.iso8601>", time.Date(2007, 1, 13, 19, 8, 0, 0, time.UTC)},
		{"base64 wrapped", "<base64>cGlu\nZ2Q=</base64>", []byte("pingd")},
		{"base64 unpadded", "<base64>cGluZ2Q</base64>", []byte("pingd")},
		{"empty struct", "<struct></struct>", map[string]any{}},
		{"empty array", "<array><data/></array>", []any{}},
		{"nested", "<array><data><value><struct><member><name>a</name><value><array><data><value>x</value></data></array></value></member></struct></value></data></array>",
			[]any{map[string]any{"a": []any{"x"}}}},
		{"member value before name", "<struct><member><value>v</value><name>n</name></member></struct>", map[string]any{"n": "v"}},
		{"nil", "<nil/>", nil},
		{"nil in a namespace", `<ex:nil xmlns:ex="http://ws.apache.org/xmlrpc/namespaces/extensions"/>`, nil},
		{"comment ignored", "<string>a<!-- c -->b</string>", "ab"},
		{"character reference", "<string>&#x263A;&#9731;</string>", "☺☃"},
		{"CDATA", "<string><![CDATA[<b>]]></string>", "<b>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call, err := DecodeCall(strings.NewReader(value(tt.inner)), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if len(call.Params) != 1 || !reflect.DeepEqual(call.Params[0], tt.want) {
				t.Fatalf("got %#v, want %#v", call.Params, tt.want)
			}
		})
	}
}

func TestDecodeCallShapes(t *testing.T) {
	call, err := DecodeCall(strings.NewReader("<methodCall><methodName> system.listMethods </methodName></methodCall>"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if call.Method != "system.listMethods" || call.Params == nil || len(call.Params) != 0 {
		t.Fatalf("call = %#v", call)
	}
	call, err = DecodeCall(strings.NewReader("<!-- hi --><methodCall><methodName>a/b:c_d</methodName><params/></methodCall>\n<!-- bye -->\n"), Limits{})
	if err != nil || call.Method != "a/b:c_d" {
		t.Fatalf("call = %#v, %v", call, err)
	}
}

func TestDecodeISO88591(t *testing.T) {
	doc := []byte("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><methodCall><methodName>m</methodName><params><param><value>caf\xe9</value></param></params></methodCall>")
	call, err := DecodeCall(bytes.NewReader(doc), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if call.Params[0] != "café" {
		t.Fatalf("got %q", call.Params[0])
	}
	_, err = DecodeCall(strings.NewReader(`<?xml version="1.0" encoding="x-no-such"?><methodCall><methodName>m</methodName></methodCall>`), Limits{})
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("unknown encoding: err = %v", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	laughs := `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]>` +
		`<methodCall><methodName>m</methodName><params><param><value>&lol2;</value></param></params></methodCall>`
	external := `<?xml version="1.0"?><!DOCTYPE m [<!ENTITY x SYSTEM "file:///etc/passwd">]>` +
		`<methodCall><methodName>m</methodName><params><param><value>&x;</value></param></params></methodCall>`
	deep := strings.Repeat("<array><data><value>", 40) + "x" + strings.Repeat("</value></data></array>", 40)
	tests := []struct {
		name string
		doc  string
		want error
	}{
		{"empty", "", ErrMalformed},
		{"not xml", "hello", ErrMalformed},
		{"entity expansion", laughs, ErrMalformed},
		{"external entity", external, ErrMalformed},
		{"undefined entity", value("&nbsp;"), ErrMalformed},
		{"invalid UTF-8 text", value("<string>\xff\xfe</string>"), ErrMalformed},
		{"invalid UTF-8 comment", value("<!-- \xff -->x"), ErrMalformed},
		{"wrong root", "<methodResponse/>", ErrMalformed},
		{"two roots", "<methodCall><methodName>m</methodName></methodCall><methodCall/>", ErrMalformed},
		{"trailing text", "<methodCall><methodName>m</methodName></methodCall>junk", ErrMalformed},
		{"unclosed", "<methodCall><methodName>m</methodName>", ErrMalformed},
		{"mismatched tags", "<methodCall><methodName>m</methodCall></methodName>", ErrMalformed},
		{"no methodName", "<methodCall><params/></methodCall>", ErrMalformed},
		{"two methodNames", "<methodCall><methodName>a</methodName><methodName>b</methodName></methodCall>", ErrMalformed},
		{"bad methodName", "<methodCall><methodName>a b</methodName></methodCall>", ErrMalformed},
		{"element in methodName", "<methodCall><methodName><b>a</b></methodName></methodCall>", ErrMalformed},
		{"text in params", "<methodCall><methodName>m</methodName><params>x</params></methodCall>", ErrMalformed},
		{"param without value", "<methodCall><methodName>m</methodName><params><param/></params></methodCall>", ErrMalformed},
		{"param with two values", "<methodCall><methodName>m</methodName><params><param><value/><value/></param></params></methodCall>", ErrMalformed},
		{"unknown element", "<methodCall><methodName>m</methodName><extra/></methodCall>", ErrMalformed},
		{"unknown type", value("<float>1</float>"), ErrMalformed},
		{"two types", value("<int>1</int><int>2</int>"), ErrMalformed},
		{"mixed content", value("x<int>1</int>"), ErrMalformed},
		{"int not a number", value("<int>one</int>"), ErrMalformed},
		{"int overflow", value("<int>2147483648</int>"), ErrMalformed},
		{"i8 unsupported", value("<i8>1</i8>"), ErrMalformed},
		{"boolean 2", value("<boolean>2</boolean>"), ErrMalformed},
		{"double NaN", value("<double>NaN</double>"), ErrMalformed},
		{"double Inf", value("<double>1e999</double>"), ErrMalformed},
		{"double hex", value("<double>0x1p-2</double>"), ErrMalformed},
		{"bad date", value("<dateTime.iso8601>yesterday</dateTime.iso8601>"), ErrMalformed},
		{"bad base64", value("<base64>!!!</base64>"), ErrMalformed},
		{"element in string", value("<string><b/></string>"), ErrMalformed},
		{"element in nil", value("<nil><x/></nil>"), ErrMalformed},
		{"member without value", value("<struct><member><name>a</name></member></struct>"), ErrMalformed},
		{"duplicate member", value("<struct><member><name>a</name><value/></member><member><name>a</name><value/></member></struct>"), ErrMalformed},
		{"array without data", value("<array></array>"), ErrMalformed},
		{"array with two data", value("<array><data/><data/></array>"), ErrMalformed},
		{"too deep", value(deep), ErrLimit},
		{"too many values", value("<array><data>" + strings.Repeat("<value/>", DefaultMaxValues+1) + "</data></array>"), ErrLimit},
		{"too large", value(strings.Repeat("x", DefaultMaxBytes)), ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call, err := DecodeCall(strings.NewReader(tt.doc), Limits{})
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v (call %#v), want %v", err, call, tt.want)
			}
			if !IsDecodeError(err) {
				t.Fatalf("IsDecodeError(%v) = false", err)
			}
		})
	}
}

func TestLimitsAreConfigurable(t *testing.T) {
	doc := value("<array><data><value><array><data><value>x</value></data></array></value></data></array>")
	if _, err := DecodeCall(strings.NewReader(doc), Limits{MaxDepth: 2}); !errors.Is(err, ErrLimit) {
		t.Fatalf("depth 2: err = %v", err)
	}
	if _, err := DecodeCall(strings.NewReader(doc), Limits{MaxDepth: 3}); err != nil {
		t.Fatalf("depth 3: %v", err)
	}
	if _, err := DecodeCall(strings.NewReader(doc), Limits{MaxValues: 2}); !errors.Is(err, ErrLimit) {
		t.Fatalf("2 values: err = %v", err)
	}
	if _, err := DecodeCall(strings.NewReader(doc), Limits{MaxBytes: int64(len(doc) - 1)}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("size: err = %v", err)
	}
	if _, err := DecodeCall(strings.NewReader(doc), Limits{MaxBytes: int64(len(doc))}); err != nil {
		t.Fatalf("exact size: %v", err)
	}
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

func TestReadErrorIsWrapped(t *testing.T) {
	sentinel := errors.New("connection reset")
	_, err := DecodeCall(failingReader{sentinel}, Limits{})
	if !errors.Is(err, sentinel) || IsDecodeError(err) {
		t.Fatalf("err = %v, want the reader's error and not a decode error", err)
	}
}

func TestFaults(t *testing.T) {
	_, err := DecodeResponse(bytes.NewReader(readSpec(t, "fault.xml")), Limits{})
	var f *Fault
	if !errors.As(err, &f) || f.Code != 4 || f.Message != "Too many parameters." {
		t.Fatalf("err = %v, want fault 4", err)
	}
	for _, want := range []*Fault{
		{Code: FaultMethodNotFound, Message: "no such method: x"},
		{Code: 0, Message: ""},
		{Code: FaultInvalidParams, Message: "need <url> & \"name\" \n ☺"},
	} {
		_, err := DecodeResponse(bytes.NewReader(MarshalFault(want)), Limits{})
		var got *Fault
		if !errors.As(err, &got) || *got != *want {
			t.Errorf("fault round trip = %v, want %v", err, want)
		}
	}
	bad := []string{
		"<methodResponse><fault><value><string>x</string></value></fault></methodResponse>",
		"<methodResponse><fault><value><struct><member><name>faultString</name><value>x</value></member></struct></value></fault></methodResponse>",
		"<methodResponse><fault><value><struct><member><name>faultCode</name><value><int>1</int></value></member></struct></value></fault></methodResponse>",
		"<methodResponse/>",
		"<methodResponse><params/></methodResponse>",
		"<methodResponse><params><param><value/></param><param><value/></param></params></methodResponse>",
		"<methodResponse><params><param><value/></param></params><fault/></methodResponse>",
	}
	for _, doc := range bad {
		if _, err := DecodeResponse(strings.NewReader(doc), Limits{}); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", doc, err)
		}
	}
}

func TestMarshal(t *testing.T) {
	type named string
	at := time.Date(2024, 2, 29, 23, 59, 58, 0, time.FixedZone("x", 3600))
	n := 5
	in := []any{
		int64(-7), uint16(9), float32(0.5), named("n"), []string{"a", "b"},
		map[string]int{"z": 1, "a": 2}, at, &n, (*int)(nil), [2]bool{true, false},
	}
	enc, err := MarshalCall("t.all", in...)
	if err != nil {
		t.Fatal(err)
	}
	call, err := DecodeCall(bytes.NewReader(enc), Limits{})
	if err != nil {
		t.Fatalf("%v\n%s", err, enc)
	}
	want := []any{
		-7, 9, 0.5, "n", []any{"a", "b"},
		map[string]any{"a": 2, "z": 1}, at.UTC(), 5, nil, []any{true, false},
	}
	if !reflect.DeepEqual(call.Params, want) {
		t.Fatalf("got %#v\nwant %#v", call.Params, want)
	}
	if !bytes.Contains(enc, []byte("<member><name>a</name><value><int>2</int></value></member><member><name>z</name>")) {
		t.Errorf("struct members are not sorted:\n%s", enc)
	}
	for _, bad := range []any{int64(math.MaxInt32) + 1, math.NaN(), math.Inf(1), map[int]string{1: "a"}, make(chan int), func() {}} {
		if _, err := MarshalResponse(bad); err == nil {
			t.Errorf("MarshalResponse(%T) succeeded", bad)
		}
	}
	if _, err := MarshalCall("bad name"); err == nil {
		t.Error("MarshalCall accepted an invalid method name")
	}
	var deep any = "x"
	for range DefaultMaxDepth + 1 {
		deep = []any{deep}
	}
	if _, err := MarshalResponse(deep); err == nil {
		t.Error("MarshalResponse accepted a value nested too deeply")
	}
}
