package rsscloud

import (
	"encoding/json"
	"encoding/xml"
	"testing"
)

func TestAnswers(t *testing.T) {
	var r struct {
		XMLName xml.Name
		Success string `xml:"success,attr"`
		Msg     string `xml:"msg,attr"`
	}
	msg := `a "quoted" <msg> & more`
	if err := xml.Unmarshal(EncodeResult(ElemResult, false, msg), &r); err != nil || r.XMLName.Local != "result" || r.Success != "false" || r.Msg != msg {
		t.Fatalf("result: %+v %v", r, err)
	}
	if err := xml.Unmarshal(EncodeNotifyResult(true, MsgRegistered), &r); err != nil || r.XMLName.Local != "notifyResult" || r.Success != "true" || r.Msg != MsgRegistered {
		t.Fatalf("notifyResult: %+v %v", r, err)
	}
	var j map[string]any
	if err := json.Unmarshal(EncodeJSONResult(true, msg), &j); err != nil || len(j) != 2 || j["success"] != true || j["msg"] != msg {
		t.Fatalf("JSON: %v %v", j, err)
	}
	if got := ReadResourceMessage("http://x.example/rss.xml"); got != "The subscription was cancelled because there was an error reading the resource at URL http://x.example/rss.xml." {
		t.Fatalf("ReadResourceMessage: %q", got)
	}
}

func TestChallenged(t *testing.T) {
	for _, c := range []struct {
		protocol, domain string
		want             bool
	}{
		{HTTPPost, "", false}, {HTTPPost, "cb.example", true}, {HTTPSPost, "cb.example", true},
		{SOAP, "cb.example", true}, {XMLRPC, "cb.example", false}, {XMLRPC, "", false},
	} {
		if got := Challenged(c.protocol, c.domain); got != c.want {
			t.Errorf("Challenged(%q, %q) = %v", c.protocol, c.domain, got)
		}
	}
}
