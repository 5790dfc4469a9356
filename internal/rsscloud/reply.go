package rsscloud

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/pingd/pingd/internal/soap"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// Call names the rssCloud call whose answer CheckAnswer judges.
type Call int

const (
	// Notify is a notification to a subscriber's callback (delivery).
	Notify Call = iota
	// PleaseNotify is a registration with a cloud (upstream).
	PleaseNotify
)

// ErrAnsweredFalse is an XML-RPC or SOAP answer whose result is false.
var ErrAnsweredFalse = errors.New("answered false")

// CheckAnswer is the rule for the HTTP answer to an rssCloud call made in
// protocol: nil when the call worked. Every call needs a 2xx; an XML-RPC
// call a true result; a SOAP call no fault, looked for before the status
// because a fault comes with HTTP 500 and its message says more. A
// pleaseNotify also needs a true SOAP result, or over http-post a
// <notifyResult success="true"/>; a notification's SOAP or http-post
// answer has no result to read. body is the answer as read, already
// capped by the caller.
func CheckAnswer(call Call, protocol string, status int, body []byte) error {
	if protocol == SOAP {
		if f := soap.FaultString(body); f != "" {
			return fmt.Errorf("SOAP fault: %s", f)
		}
	}
	if status < 200 || status > 299 {
		return fmt.Errorf("HTTP %d", status)
	}
	var ok bool
	var err error
	switch {
	case protocol == XMLRPC:
		ok, err = xmlrpc.DecodeBoolResponse(bytes.NewReader(body), xmlrpc.Limits{MaxBytes: int64(len(body)) + 1})
		if err != nil {
			return fmt.Errorf("XML-RPC answer: %w", err)
		}
	case call == Notify:
		return nil
	case protocol == SOAP:
		ok, err = soap.DecodeBoolResponse(body)
		if err != nil {
			return fmt.Errorf("SOAP answer: %w", err)
		}
	default:
		// <notifyResult success="true|false" msg="…"/>
		if !strings.Contains(strings.ToLower(string(body)), `success="true"`) {
			return fmt.Errorf("refused: %s", strings.TrimSpace(string(body)))
		}
		return nil
	}
	if !ok {
		return ErrAnsweredFalse
	}
	return nil
}
