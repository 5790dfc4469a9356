package cnws

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/htmlindex"

	"github.com/pingd/pingd/hub"
)

// CNWS documents as pingd receives them: POST /cnws takes a
// <notification> holding a <subscribe> (a subscriber asks to be told when
// a resource changes) or a <resourceChange> (a publisher says it changed).

// maxDepth bounds the nesting of a CNWS document.
const maxDepth = 8

// maxFieldBytes caps one field's text (a description may be long, but
// not without end).
const maxFieldBytes = 256 << 10

// Request is a decoded CNWS <notification>: exactly one of Subscribe
// and Change is set.
type Request struct {
	Subscribe *Subscribe
	Change    *ReceivedChange
}

// Subscribe is a <subscribe>.
type Subscribe struct {
	ResourceID      string
	NotificationURL string
}

// ReceivedChange is a <resourceChange> a publisher sent. ChangeTime is kept as given: the
// draft shows an RFC 1123 date with a zone name, which no parser reads
// reliably, and pingd stamps changes with its own clock anyway.
type ReceivedChange struct {
	ResourceID  string
	ChangeTime  string
	Title       string
	Description string
	// HasText says whether a title or description was given.
	HasText bool
	// Extensions are the elements of other namespaces it carried, each a
	// self-contained XML element, in document order.
	Extensions string
}

// ErrInvalid marks a document that is not a valid CNWS notification.
var ErrInvalid = errors.New("invalid CNWS document")

func errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Decode reads one CNWS <notification> of at most max bytes. It
// accepts the root in the draft's namespace or in none (early clients
// left it out), refuses DOCTYPEs and any other declaration, and checks
// what the draft says: URLs that are absolute http(s), a title of at most
// 255 characters, title and description free of markup.
func Decode(r io.Reader, max int64) (Request, error) {
	body, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return Request{}, err
	}
	if int64(len(body)) > max {
		return Request{}, errorf("document larger than %d bytes", max)
	}
	body = bytes.TrimPrefix(body, []byte("\uFEFF"))
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = true
	d.CharsetReader = func(label string, input io.Reader) (io.Reader, error) {
		enc, err := htmlindex.Get(label)
		if err != nil {
			return nil, fmt.Errorf("unsupported encoding %q", label)
		}
		return enc.NewDecoder().Reader(input), nil
	}
	var req Request
	var stack []string
	var fields map[string]string
	var field string
	var text strings.Builder
	seenRoot := false
	skip := 0 // depth of an extension element being skipped, 0: none
	// Extension elements of a resourceChange are kept, each re-encoded on
	// its own with the namespace declarations it needs (extensions.go).
	var ext extensionCapture
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Request{}, errorf("not well-formed XML: %v", err)
		}
		switch t := tok.(type) {
		case xml.Directive:
			return Request{}, errorf("declarations (DOCTYPE) are not allowed")
		case xml.StartElement:
			if len(stack) >= maxDepth {
				return Request{}, errorf("nested deeper than %d elements", maxDepth)
			}
			stack = append(stack, t.Name.Local)
			if skip > 0 {
				if err := ext.token(t); err != nil {
					return Request{}, err
				}
				continue
			}
			ns := t.Name.Space
			ours := ns == Namespace || ns == ""
			switch depth := len(stack); {
			case depth == 1:
				if seenRoot {
					return Request{}, errorf("more than one root element")
				}
				seenRoot = true
				if t.Name.Local != "notification" || !ours {
					return Request{}, errorf("the root element is {%s}%s, not a CNWS <notification>", ns, t.Name.Local)
				}
				if v, ok := attr(t, "version"); ok && strings.TrimSpace(v) != "1.0" {
					return Request{}, errorf("version %q (want 1.0)", v)
				}
			case !ours:
				// Extensions live in other namespaces; the draft lets
				// receivers ignore them.
				if field != "" {
					return Request{}, errorf("<%s> must be plain text, without markup", field)
				}
				skip = depth
				if depth == 3 && stack[1] == "resourceChange" {
					if err := ext.start(t); err != nil {
						return Request{}, err
					}
				}
			case depth == 2:
				if fields != nil {
					return Request{}, errorf("a notification carries one <subscribe> or <resourceChange>, not more")
				}
				if t.Name.Local != "subscribe" && t.Name.Local != "resourceChange" {
					return Request{}, errorf("unknown element <%s>", t.Name.Local)
				}
				fields = map[string]string{}
			case depth == 3:
				if _, dup := fields[t.Name.Local]; dup {
					return Request{}, errorf("<%s> given twice", t.Name.Local)
				}
				field = t.Name.Local
				text.Reset()
			default:
				return Request{}, errorf("<%s> must be plain text, without markup", field)
			}
		case xml.EndElement:
			depth := len(stack)
			stack = stack[:depth-1]
			if skip > 0 {
				if err := ext.token(t); err != nil {
					return Request{}, err
				}
				if depth == skip {
					skip = 0
					if err := ext.end(); err != nil {
						return Request{}, err
					}
				}
				continue
			}
			switch depth {
			case 3:
				fields[field] = text.String()
				field = ""
			case 2:
				var err error
				if t.Name.Local == "subscribe" {
					req.Subscribe, err = subscribeOf(fields)
				} else {
					req.Change, err = changeOf(fields)
				}
				if err != nil {
					return Request{}, err
				}
			}
		case xml.CharData:
			if skip > 0 {
				if err := ext.token(t); err != nil {
					return Request{}, err
				}
				continue
			}
			switch {
			case field != "" && skip == 0:
				if text.Len()+len(t) > maxFieldBytes {
					return Request{}, errorf("<%s> longer than %d bytes", field, maxFieldBytes)
				}
				text.Write(t)
			case len(stack) == 0 && len(bytes.TrimSpace(t)) > 0:
				return Request{}, errorf("text outside the root element")
			}
		}
	}
	if !seenRoot {
		return Request{}, errorf("empty document")
	}
	if req.Subscribe == nil && req.Change == nil {
		return Request{}, errorf("the notification has neither <subscribe> nor <resourceChange>")
	}
	if req.Change != nil {
		req.Change.Extensions = ext.String()
	}
	return req, nil
}

func attr(el xml.StartElement, name string) (string, bool) {
	for _, a := range el.Attr {
		if a.Name.Space == "" && a.Name.Local == name {
			return a.Value, true
		}
	}
	return "", false
}

func urlField(fields map[string]string, name string) (string, error) {
	u := strings.TrimSpace(fields[name])
	if u == "" {
		return "", errorf("<%s> is missing", name)
	}
	if err := hub.ValidURL(u); err != nil {
		return "", errorf("<%s>: %v", name, err)
	}
	return u, nil
}

func subscribeOf(fields map[string]string) (*Subscribe, error) {
	res, err := urlField(fields, "resourceID")
	if err != nil {
		return nil, err
	}
	cb, err := urlField(fields, "notificationURL")
	if err != nil {
		return nil, err
	}
	return &Subscribe{ResourceID: res, NotificationURL: cb}, nil
}

func changeOf(fields map[string]string) (*ReceivedChange, error) {
	res, err := urlField(fields, "resourceID")
	if err != nil {
		return nil, err
	}
	title, titleGiven := fields["title"]
	desc, descGiven := fields["description"]
	title, desc = strings.TrimSpace(title), strings.TrimSpace(desc)
	if n := utf8.RuneCountInString(title); n > MaxTitleRunes {
		return nil, errorf("the title has %d characters; at most %d are allowed", n, MaxTitleRunes)
	}
	return &ReceivedChange{
		ResourceID:  res,
		ChangeTime:  strings.TrimSpace(fields["changeTime"]),
		Title:       Text(title, MaxTitleRunes),
		Description: Text(desc, 0),
		HasText:     (titleGiven && title != "") || (descGiven && desc != ""),
	}, nil
}
