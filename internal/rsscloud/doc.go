// Package rsscloud is the vocabulary of rssCloud (seed 001: the <cloud>
// element, pleaseNotify and notify) as pingd speaks it: as a cloud
// (httpapi takes registrations, delivery checks them and notifies) and as
// a subscriber of other clouds (upstream).
//
// Its room: the names (the protocols a registration may name, the
// 25-hour lease, suspension after three failed notifications, the bound on
// a registration's check and the key a named domain is recorded under),
// the pleaseNotify registration (ParsePleaseNotifyForm for the REST form,
// NewRegistration for the parameters as the XML-RPC and SOAP calls give
// them, and the callback a registration names), which registrations are
// checked with a challenge (Challenged), the REST answers in XML and JSON
// with the wordings rssCloud clients read (answer.go: EncodeResult,
// EncodeJSONResult, the messages, the fault code of rssCloud servers),
// the notify call in each protocol (EncodeNotification) and the rule for
// the answer to a notify or pleaseNotify call (reply.go: CheckAnswer),
// so that delivery and upstream judge answers alike.
//
// It is a room of its own, as mellium gives each XEP its package, so that
// the HTTP side, delivery and upstream share one definition of the
// protocol without importing each other. The wire codecs stay in
// internal/xmlrpc and internal/soap; this package knows which calls
// rssCloud makes with them. It does no I/O and imports no pingd package
// but hub (for URL validation and its error kinds) and those two codecs.
package rsscloud
