package cnws

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
)

// maxStatusBytes caps what DecodeStatus reads of an answer.
const maxStatusBytes = 64 << 10

// Change is the content of one <resourceChange> pingd sends.
type Change struct {
	ResourceID  string
	ChangeTime  time.Time
	Title       string
	Description string
	// Extensions are the publisher's elements of other namespaces, each a
	// self-contained XML element, passed on as they came.
	Extensions string
}

// EncodeChange renders a <notification> carrying one <resourceChange>.
// The title is cut to 255 characters; both texts lose control characters
// XML cannot carry.
func EncodeChange(ch Change) ([]byte, error) {
	if err := hub.ValidURL(ch.ResourceID); err != nil {
		return nil, fmt.Errorf("CNWS resourceID: %w", err)
	}
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<notification version="1.0" xmlns="` + Namespace + `">` + "\n<resourceChange>\n")
	element(&b, "resourceID", ch.ResourceID)
	element(&b, "changeTime", ch.ChangeTime.UTC().Format(http.TimeFormat))
	if t := Text(ch.Title, MaxTitleRunes); t != "" {
		element(&b, "title", t)
	}
	if d := Text(ch.Description, 0); d != "" {
		element(&b, "description", d)
	}
	if ch.Extensions != "" {
		b.WriteString(ch.Extensions + "\n")
	}
	b.WriteString("</resourceChange>\n</notification>\n")
	return b.Bytes(), nil
}

func element(b *bytes.Buffer, name, text string) {
	b.WriteString("<" + name + ">")
	_ = xml.EscapeText(b, []byte(text))
	b.WriteString("</" + name + ">\n")
}

// DecodeStatus reads the <status> of a CNWS <result> answer. ok is
// false when the body is not such a document (or says neither true nor
// false): the caller decides what an unreadable answer means.
func DecodeStatus(body []byte) (status, ok bool) {
	d := xml.NewDecoder(io.LimitReader(bytes.NewReader(body), maxStatusBytes))
	d.Strict = true
	var path []string
	var text strings.Builder
	for {
		tok, err := d.Token()
		if err != nil {
			return false, false
		}
		switch t := tok.(type) {
		case xml.StartElement:
			path = append(path, t.Name.Local)
			text.Reset()
		case xml.EndElement:
			if len(path) >= 2 && path[len(path)-1] == "status" && path[len(path)-2] == "result" {
				switch strings.ToLower(strings.TrimSpace(text.String())) {
				case "true", "1":
					return true, true
				case "false", "0":
					return false, true
				}
				return false, false
			}
			if len(path) > 0 {
				path = path[:len(path)-1]
			}
		case xml.CharData:
			if text.Len() < 64 {
				text.Write(t)
			}
		case xml.Directive:
			return false, false // no DOCTYPE: nothing to expand
		}
	}
}

// MessageNS is the namespace of pingd's explanation in CNWS answers.
const MessageNS = "urn:pingd:cnws"

// EncodeResult renders the answer to a <subscribe> or <resourceChange>: a
// <notification><result> with the status and, when given, the resource's
// title and description. An error message, when given, goes in a
// <message> element of pingd's own namespace (MessageNS), which CNWS
// clients ignore as the draft's extension rule lets them.
func EncodeResult(status bool, title, desc, msg string) []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<notification version="1.0" xmlns="` + Namespace + `">` + "\n<result>\n")
	fmt.Fprintf(&b, "<status>%t</status>\n", status)
	for _, f := range [][2]string{{"title", title}, {"description", desc}} {
		if f[1] == "" {
			continue
		}
		b.WriteString("<" + f[0] + ">")
		_ = xml.EscapeText(&b, []byte(f[1]))
		b.WriteString("</" + f[0] + ">\n")
	}
	if msg != "" {
		b.WriteString(`<message xmlns="` + MessageNS + `">`)
		_ = xml.EscapeText(&b, []byte(msg))
		b.WriteString("</message>\n")
	}
	b.WriteString("</result>\n</notification>\n")
	return b.Bytes()
}
