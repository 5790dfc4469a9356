package hub

import (
	"bytes"
)

// withExtensions adds a change announcement's extension elements to the
// Atom entry payloads of the entries that change brought, before the
// entry's closing tag, so XMPP items and webhook feeds carry them as
// Atom extension elements (RFC 4287 §6.4: foreign markup is allowed in an
// entry). Payloads that do not end with </entry> are left alone.
func withExtensions(entries []Entry, ext string) []Entry {
	if ext == "" {
		return entries
	}
	out := make([]Entry, len(entries))
	for i, e := range entries {
		out[i] = e
		p := bytes.TrimRight(e.Payload, " \t\r\n")
		if !bytes.HasSuffix(p, []byte("</entry>")) || len(p)+len(ext) > MaxEntryPayloadBytes {
			continue // an entry at its size limit goes without them
		}
		cut := len(p) - len("</entry>")
		payload := make([]byte, 0, len(p)+len(ext))
		payload = append(payload, p[:cut]...)
		payload = append(payload, ext...)
		payload = append(payload, p[cut:]...)
		out[i].Payload = payload
	}
	return out
}
