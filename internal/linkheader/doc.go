// Package linkheader parses HTTP Link header fields (RFC 8288): several
// links per field and several fields, parameters with quoted strings
// (commas and semicolons inside quotes, backslash escapes), rel lists
// ("hub self"), the anchor parameter that moves a link's context, and
// RFC 8187 extended values (title*). It follows the parsing algorithm of
// RFC 8288 Appendix B, stopping at what it cannot read instead of
// guessing.
//
// It is a room of its own because two packages read Link headers from
// the web: feed (a fetched source's WebSub hub, for upstream push) and
// discovery (what a page or feed offers). Its room: the parser and its
// bounds. It does no I/O, knows nothing of what the relations mean, and
// imports no pingd package.
package linkheader
