package rsscloud

import (
	"time"

	"github.com/pingd/pingd/internal/soap"
)

// rssCloud protocols a registration may name (case-sensitive, as the
// specification says). https-post is http-post over TLS, the common
// extension of rssCloud servers.
const (
	HTTPPost  = "http-post"
	HTTPSPost = "https-post"
	XMLRPC    = "xml-rpc"
	SOAP      = "soap"
)

// ValidProtocol reports whether p is an rssCloud protocol pingd speaks.
func ValidProtocol(p string) bool {
	switch p {
	case HTTPPost, HTTPSPost, XMLRPC, SOAP:
		return true
	}
	return false
}

// rssCloud rules.
const (
	// Lease is how long a registration lasts; subscribers register
	// again every 24 hours.
	Lease = 25 * time.Hour
	// SuspendAfter consecutive failed notifications stop a
	// registration until it is renewed.
	SuspendAfter = 3
	// VerifyTimeout bounds the check of a registration (the challenge
	// GET or the test notification): pleaseNotify answers only after it.
	VerifyTimeout = 10 * time.Second
)

// VerifyDomain is the key of hub.Options.Verify that holds the domain
// a registration named (see Challenged).
const VerifyDomain = "domain"

// Challenged reports whether a registration of protocol that named domain
// is checked with a challenge GET (the callback echoes a random string)
// rather than with a test notification. An XML-RPC responder cannot
// answer a GET: such a subscriber proves it asked by answering a test call
// of its procedure with boolean true, as rssCloud servers have always
// checked them. A SOAP one keeps the challenge: its test call passes on
// any 2xx without a SOAP Fault, which any web server gives, so it would
// prove nothing about the named host.
func Challenged(protocol, domain string) bool {
	return domain != "" && protocol != XMLRPC
}

// ValidSOAPProcedure reports whether name can be the element name of a
// SOAP call: an XML name without a prefix.
func ValidSOAPProcedure(name string) bool { return soap.ValidProcedure(name) }
