package xmlrpc

import (
	"reflect"
	"testing"
)

// simpleCallCases are documents of the simple shape (taken by
// decodeSimpleCall) and of shapes left to the general decoder.
var simpleCallCases = []struct {
	doc    string
	simple bool
}{
	{`<?xml version="1.0"?><methodCall><methodName>weblogUpdates.ping</methodName><params>` +
		`<param><value><string>Bench weblog</string></value></param>` +
		`<param><value><string>http://blog.example/</string></value></param></params></methodCall>`, true},
	{"<?xml version='1.0' encoding='UTF-8'?>\r\n<methodCall>\n <methodName> rssCloud.ping </methodName>\n <params>\n" +
		"  <param>\n   <value>\n    <string>https://example.org/feed.xml</string>\n   </value>\n  </param>\n </params>\n</methodCall>\n", true},
	{`<methodCall><methodName>a.b</methodName></methodCall>`, true},
	{`<methodCall><methodName>a.b</methodName><params></params></methodCall>`, true},
	{`<methodCall><methodName>a</methodName><params><param><value></value></param>` +
		`<param><value><string></string></value></param><param><value>  bare	text </value></param></params></methodCall>`, true},
	{"<methodCall><methodName>x</methodName><params><param><value><string>Blog – «ünïcode» 🎉</string></value></param></params></methodCall>", true},
	// Left to the general decoder, which decodes or refuses them.
	{`<?xml version="1.0" encoding="ISO-8859-1"?><methodCall><methodName>a</methodName></methodCall>`, false},
	{`<methodCall><methodName>a</methodName><params><param><value><string>a &amp; b</string></value></param></params></methodCall>`, false},
	{`<methodCall><methodName>a</methodName><params><param><value><int>1</int></value></param></params></methodCall>`, false},
	{`<methodCall><methodName>a</methodName><params><param><value><![CDATA[x]]></value></param></params></methodCall>`, false},
	{`<methodCall><methodName>a</methodName><params><param><value><string>a` + "\r\n" + `b</string></value></param></params></methodCall>`, false},
	{`<methodCall><!-- c --><methodName>a</methodName></methodCall>`, false},
	{`<methodCall><params></params><methodName>a</methodName></methodCall>`, false},
	{`<methodCall><methodName>a</methodName></methodCall><x/>`, false},
	{`<methodCall><methodName>a b</methodName></methodCall>`, false},
	{"<methodCall><methodName>a</methodName><params><param><value><string>\xff</string></value></param></params></methodCall>", false},
	{"<methodCall><methodName>a</methodName><params><param><value><string>\x01</string></value></param></params></methodCall>", false},
	{`<methodCall><methodName>a</methodName><params><param><value>x<string>y</string></value></param></params></methodCall>`, false},
	{`<?xml version="1.1"?><methodCall><methodName>a</methodName></methodCall>`, false},
	{`<methodCall a="b"><methodName>a</methodName></methodCall>`, false},
}

func TestSimpleCallShapes(t *testing.T) {
	for _, tc := range simpleCallCases {
		data := []byte(tc.doc)
		simple, ok := decodeSimpleCall(data, DefaultMaxValues)
		if ok != tc.simple {
			t.Errorf("simple path took it: %v, want %v: %q", ok, tc.simple, tc.doc)
			continue
		}
		general, err := newParserOf(data, Limits{}.withDefaults()).methodCall()
		if ok && (err != nil || !reflect.DeepEqual(simple, general)) {
			t.Errorf("%q:\nsimple  %#v\ngeneral %#v, %v", tc.doc, simple, general, err)
		}
	}
}

// The value limit holds on the simple path: one value more than the limit
// is the general decoder's to refuse.
func TestSimpleCallValueLimit(t *testing.T) {
	doc := []byte(`<methodCall><methodName>a</methodName><params><param><value>1</value></param><param><value>2</value></param></params></methodCall>`)
	if _, ok := decodeSimpleCall(doc, 2); !ok {
		t.Fatal("two values within a limit of two not taken")
	}
	if _, ok := decodeSimpleCall(doc, 1); ok {
		t.Fatal("two values taken under a limit of one")
	}
}

// FuzzSimpleCallAgrees checks that every document the simple path takes
// is one the general decoder accepts, with the same call.
func FuzzSimpleCallAgrees(f *testing.F) {
	addSpecSeeds(f)
	for _, tc := range simpleCallCases {
		f.Add([]byte(tc.doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		simple, ok := decodeSimpleCall(doc, 4)
		if !ok {
			return
		}
		general, err := newParserOf(doc, Limits{MaxValues: 4}.withDefaults()).methodCall()
		if err != nil {
			t.Fatalf("the general decoder refuses what the simple path took: %v\n%q", err, doc)
		}
		if !reflect.DeepEqual(simple, general) {
			t.Fatalf("%q:\nsimple  %#v\ngeneral %#v", doc, simple, general)
		}
	})
}
