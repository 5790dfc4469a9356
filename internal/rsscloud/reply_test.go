package rsscloud

import (
	"errors"
	"strings"
	"testing"

	"github.com/pingd/pingd/internal/soap"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// TestCheckAnswer: one rule for the answers delivery reads (notify) and
// upstream reads (pleaseNotify).
func TestCheckAnswer(t *testing.T) {
	xmlTrue, _ := xmlrpc.MarshalResponse(true)
	xmlFalse, _ := xmlrpc.MarshalResponse(false)
	soapFault := soap.MarshalFault(soap.FaultServer, "cloud is full")
	for _, tc := range []struct {
		name     string
		call     Call
		protocol string
		status   int
		body     string
		want     string // "" when the answer is a success
	}{
		{"notify http-post 200", Notify, HTTPPost, 200, "anything", ""},
		{"notify http-post 500", Notify, HTTPPost, 500, "", "HTTP 500"},
		{"notify xml-rpc true", Notify, XMLRPC, 200, string(xmlTrue), ""},
		{"notify xml-rpc false", Notify, XMLRPC, 200, string(xmlFalse), "answered false"},
		{"notify xml-rpc junk", Notify, XMLRPC, 200, "<html/>", "XML-RPC answer"},
		{"notify xml-rpc 404 true", Notify, XMLRPC, 404, string(xmlTrue), "HTTP 404"},
		{"notify soap fault on 500", Notify, SOAP, 500, string(soapFault), "SOAP fault: cloud is full"},
		{"notify soap no result", Notify, SOAP, 200, "", ""},
		{"please http-post refused", PleaseNotify, HTTPPost, 200, string(EncodeNotifyResult(false, "no")), "refused"},
		{"please http-post ok", PleaseNotify, HTTPPost, 200, string(EncodeNotifyResult(true, "ok")), ""},
		{"please http-post 503", PleaseNotify, HTTPPost, 503, "", "HTTP 503"},
		{"please xml-rpc false", PleaseNotify, XMLRPC, 200, string(xmlFalse), "answered false"},
		{"please soap fault", PleaseNotify, SOAP, 500, string(soapFault), "cloud is full"},
		{"please soap true", PleaseNotify, SOAP, 200, string(soap.MarshalResponse("pleaseNotify", true)), ""},
		{"please soap false", PleaseNotify, SOAP, 200, string(soap.MarshalResponse("pleaseNotify", false)), "answered false"},
		{"please soap no result", PleaseNotify, SOAP, 200, "", "SOAP answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckAnswer(tc.call, tc.protocol, tc.status, []byte(tc.body))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused a good answer: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			case tc.want == "answered false" && !errors.Is(err, ErrAnsweredFalse):
				t.Fatalf("false answer is not ErrAnsweredFalse: %v", err)
			}
		})
	}
}
