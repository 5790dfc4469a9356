// Package xmlrpc is pingd's XML-RPC codec: it decodes <methodCall> and
// <methodResponse> documents into Go values and encodes calls, responses
// and faults, as the XML-RPC specification (xmlrpc.com/spec) describes.
//
// It is written by hand: no maintained Go XML-RPC library can be fetched
// for this module, and pingd needs only the codec, with limits that make it
// safe on input from the open internet: a size cap, a nesting-depth cap, a
// cap on the number of values, no DOCTYPE or other declarations (so no
// entity tricks), and strictly valid UTF-8 (other declared encodings are
// transcoded first).
//
// Values map to Go types as follows: string (also the bare text of a
// <value>) ↔ string; int, i4 ↔ int (32-bit range); boolean ↔ bool; double ↔
// float64; dateTime.iso8601 ↔ time.Time (UTC when the text has no zone);
// base64 ↔ []byte; struct ↔ map[string]any; array ↔ []any; nil ↔ nil.
//
// decode.go reads the documents, decodevalue.go the values in them;
// encode.go writes them; value.go holds Call, Fault, the fault codes and
// the limits.
//
// Its room: the wire format only. It knows nothing of HTTP or of pingd's
// methods; httpapi maps calls to the hub and delivery uses it to call
// rssCloud subscribers. It imports no other pingd package.
package xmlrpc
