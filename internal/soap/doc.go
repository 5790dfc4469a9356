// Package soap is pingd's SOAP 1.1 codec for rssCloud, whose interface
// "can be implemented in either XML-RPC or SOAP": RPC calls whose Body
// holds one element named after the procedure with positional parameters
// (a parameter with child elements is a list), their answers (an element
// <procedureResponse> holding a boolean <Result>) and Faults.
//
// pingd speaks it in three places: as a cloud (httpapi answers SOAP
// pleaseNotify and ping calls), as a notifier (delivery calls a SOAP
// subscriber's procedure) and as a subscriber of other clouds (upstream
// registers with a SOAP cloud and takes its notifications). This package
// is the one codec all three use.
//
// It is written by hand, like internal/xmlrpc: no maintained SOAP 1.1
// library for Go is among the modules this project may use, and the
// subset rssCloud needs is small. Its room: the wire format only, with
// bounds on what it reads (parameters, list items, bytes of a fault). It
// knows nothing of pingd's procedures and imports no pingd package.
package soap
