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
// a registration named: such a registration is checked with a challenge
// GET instead of a test notification.
const VerifyDomain = "domain"

// ValidSOAPProcedure reports whether name can be the element name of a
// SOAP call: an XML name without a prefix.
func ValidSOAPProcedure(name string) bool { return soap.ValidProcedure(name) }
