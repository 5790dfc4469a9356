// Package cnws is the vocabulary of the change notification web service
// (CNWS, the 2003-04-08 draft, seed 000) as pingd speaks it: it takes
// <subscribe> and <resourceChange> documents (httpapi, POST /cnws) and
// posts <resourceChange> notifications to subscribers (delivery).
//
// Its room: the names (namespace, the title's limit, the draft's minimum
// ageing of an unreachable subscriber, the content type), Decode (a
// received <notification>, size-capped, without DOCTYPE, in the draft's
// namespace or none, with the publisher's extension elements of other
// namespaces kept well-formed and bounded, extensions.go), EncodeResult
// (the <result> answer), EncodeChange and DecodeStatus (a notification
// pingd sends and the subscriber's <result> to it), and Text, the plain
// text the draft allows in titles and descriptions.
//
// It is a room of its own, as mellium gives each XEP its package, so that
// the HTTP side and delivery share one definition of the protocol without
// importing each other. Its decoders take input from outside and are
// fuzzed (FuzzDecode, FuzzDecodeStatus). It does no I/O and imports no
// pingd package but hub (for URL validation).
package cnws
