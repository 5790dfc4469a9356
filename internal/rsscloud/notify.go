package rsscloud

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/pingd/pingd/internal/soap"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// Notification is one notify call as the body of an HTTP POST.
type Notification struct {
	ContentType string
	Body        []byte
	// Header holds what the protocol adds (SOAPAction), or nil.
	Header http.Header
}

// EncodeNotification renders the call that tells a registration that
// resource changed, in the registration's protocol: an http-post form
// with url=…, an XML-RPC call of procedure with the URL, or its SOAP 1.1
// form. An empty protocol is http-post.
func EncodeNotification(protocol, procedure, resource string) (Notification, error) {
	switch protocol {
	case HTTPPost, HTTPSPost, "":
		return Notification{ContentType: "application/x-www-form-urlencoded", Body: []byte(url.Values{"url": {resource}}.Encode())}, nil
	case XMLRPC:
		body, err := xmlrpc.MarshalCall(procedure, resource)
		if err != nil {
			return Notification{}, err
		}
		return Notification{ContentType: "text/xml", Body: body}, nil
	case SOAP:
		// One string parameter url, the form Radio UserLand's SOAP
		// responders take.
		body, err := soap.MarshalCall(procedure, soap.Param{Name: "url", Value: resource})
		if err != nil {
			return Notification{}, err
		}
		return Notification{ContentType: soap.ContentType, Body: body, Header: http.Header{"Soapaction": {soap.Action(procedure)}}}, nil
	}
	return Notification{}, fmt.Errorf("unsupported rssCloud protocol %q", protocol)
}
