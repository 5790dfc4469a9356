// Package httpout is how pingd sends one HTTP request to someone else's
// server and reads the answer: delivery (callbacks, verification, relayed
// pings) and upstream (rssCloud registrations) all go through Do.
//
// Its room: building the request with the caller's context, setting the
// User-Agent, sending it through the caller's client, reading at most a
// given number of bytes of the answer, and keeping URLs' queries and user
// info out of errors (RedactURL, RedactError): those errors are logged
// and stored as a subscription's or relay's last error, and callback URLs
// often carry secrets. It judges no status and knows no protocol; the
// callers do. It is a leaf: it imports no pingd package.
package httpout
