package rsscloud

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
)

// The answers rssCloud clients read. The wordings are the ones the
// rssCloud servers they were written against give (UserLand's, and the
// Node.js server that follows it): clients show them, log them, and their
// test suites compare them.
const (
	// MsgRegistered is a pleaseNotify that worked.
	MsgRegistered = "Thanks for the registration. It worked. When the resource updates we'll notify you. " +
		"Don't forget to re-register after 24 hours, your subscription will expire in 25. Keep on truckin!"
	// MsgPinged is a ping that was taken.
	MsgPinged = "Thanks for the ping."
	// msgReadResource is a pleaseNotify for a resource that could not be
	// read (ReadResourceMessage).
	msgReadResource = "The subscription was cancelled because there was an error reading the resource at URL %s."
	// msgMissingParams is a REST call without a field it needs.
	msgMissingParams = "The following parameters were missing from the request body: %s."
)

// FaultCode is the faultCode of the faults rssCloud servers answer their
// XML-RPC calls with (UserLand's script-error code, kept by the servers
// that followed it).
const FaultCode = 4

// ReadResourceMessage says that a registration was refused because the
// resource at u could not be read.
func ReadResourceMessage(u string) string { return fmt.Sprintf(msgReadResource, u) }

// MissingParamsMessage says which fields (comma-separated) a REST call
// lacked.
func MissingParamsMessage(fields string) string { return fmt.Sprintf(msgMissingParams, fields) }

// The elements of the REST answers in XML.
const (
	// ElemNotifyResult answers pleaseNotify.
	ElemNotifyResult = "notifyResult"
	// ElemResult answers ping.
	ElemResult = "result"
)

// EncodeResult is a REST answer in XML, as rssCloud clients expect it:
// <element success="true|false" msg="…"/>, element being ElemNotifyResult
// or ElemResult.
func EncodeResult(element string, ok bool, msg string) []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	fmt.Fprintf(&b, `<%s success="%t" msg="`, element, ok)
	_ = xml.EscapeText(&b, []byte(msg))
	b.WriteString("\"/>\n")
	return b.Bytes()
}

// EncodeNotifyResult is the answer to a REST pleaseNotify in XML.
func EncodeNotifyResult(ok bool, msg string) []byte { return EncodeResult(ElemNotifyResult, ok, msg) }

// EncodeJSONResult is a REST answer for a client that asked for JSON
// (Accept: application/json): {"success": true|false, "msg": "…"}, for
// pleaseNotify and ping alike.
func EncodeJSONResult(ok bool, msg string) []byte {
	b, err := json.Marshal(struct {
		Success bool   `json:"success"`
		Msg     string `json:"msg"`
	}{ok, msg})
	if err != nil { // a bool and a string always encode
		return []byte(`{"success":false,"msg":""}`)
	}
	return append(b, '\n')
}
