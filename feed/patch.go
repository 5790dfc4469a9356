package feed

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/beevik/etree"

	"github.com/pingd/pingd/hub"
)

// PatchNS is the namespace of RFC 7351 XML patch documents, whose
// operations are those of RFC 5261.
const PatchNS = "urn:ietf:rfc:7351"

// PatchContentType is the media type of an RFC 7351 patch document.
const PatchContentType = "application/xml-patch+xml"

// patchAnchor is where new entries go: right after the feed's <updated>,
// the last metadata element AtomFeed writes. That is the top of the
// entries whether or not the previous document had any, and keeps RFC 4287's
// order (metadata first, then entries) — prepending to <feed> would not.
const patchAnchor = "/a:feed/a:updated"

// ErrPatch is returned for a patch that cannot be applied.
var ErrPatch = errors.New("cannot apply patch")

// Patch renders an RFC 7351 patch document of RFC 5261 operations that
// turns the previous Atom document of a node (as AtomFeed renders it) into
// the next one: first a <p:remove> for each id in removedIDs (item ids of
// retracted entries, which must be in the previous document; an id that is
// also among added is a replaced entry), then one <p:add> of the added
// entries, newest first, at the top of the feed's entries. added is in log
// order (ascending Seq); entries are rendered as AtomFeed renders them.
func Patch(added []hub.Event, removedIDs []string) []byte {
	doc := etree.NewDocument()
	doc.WriteSettings = writeSettings
	doc.CreateProcInst("xml", `version="1.0" encoding="utf-8"`)
	doc.CreateText("\n")
	p := doc.CreateElement("p:patch")
	p.CreateAttr("xmlns:p", PatchNS)
	p.CreateAttr("xmlns:a", AtomNS)
	for _, id := range uniqueStrings(removedIDs) {
		r := p.CreateElement("p:remove")
		r.CreateAttr("sel", "/a:feed/a:entry[a:id="+XPathLiteral(AtomID(id))+"]")
	}
	items := newestFirst(added)
	if len(items) > 0 {
		add := p.CreateElement("p:add")
		add.CreateAttr("sel", patchAnchor)
		add.CreateAttr("pos", "after")
		for _, ev := range items {
			add.AddChild(atomEntry(ev))
		}
	}
	spaceChildren(p)
	return writeDoc(doc)
}

// newestFirst keeps the item events, one per item id (the newest), and
// orders them newest first: by descending Seq when every event has one,
// else by reversing the given order.
func newestFirst(events []hub.Event) []hub.Event {
	var items []hub.Event
	haveSeq := true
	for _, ev := range events {
		if ev.Kind != "" && ev.Kind != hub.EventItem {
			continue
		}
		items = append(items, ev)
		haveSeq = haveSeq && ev.Seq != 0
	}
	if haveSeq {
		slices.SortStableFunc(items, func(a, b hub.Event) int { return int(max(min(b.Seq-a.Seq, 1), -1)) })
	} else {
		slices.Reverse(items)
	}
	seen := map[string]bool{}
	out := items[:0]
	for _, ev := range items {
		if ev.ItemID != "" && seen[ev.ItemID] {
			continue
		}
		seen[ev.ItemID] = true
		out = append(out, ev)
	}
	return out
}

func uniqueStrings(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// XPathLiteral quotes s as an XPath 1.0 string literal: in single quotes,
// else double quotes, else (both kinds inside) as a concat() of pieces.
func XPathLiteral(s string) string {
	switch {
	case !strings.Contains(s, "'"):
		return "'" + s + "'"
	case !strings.Contains(s, `"`):
		return `"` + s + `"`
	}
	var parts []string
	for i, piece := range strings.Split(s, "'") {
		if i > 0 {
			parts = append(parts, `"'"`)
		}
		if piece != "" {
			parts = append(parts, "'"+piece+"'")
		}
	}
	return "concat(" + strings.Join(parts, ", ") + ")"
}

// maxPatchOps bounds the operations of one patch.
const maxPatchOps = 10000

// ApplyPatch applies an RFC 7351 patch to doc and returns the new document.
// It supports what Patch emits and a little more: <add> (pos before, after,
// prepend or append; element, text and comment content), <remove> and
// <replace> of elements, with selectors that are absolute location paths of
// element steps (prefixed or not, or *) with predicates [n],
// [name='literal'], [@attr='literal'] and [text()='literal'], where a
// literal may be a concat() of literals. Prefixes are resolved in the
// patch's namespace context; an unprefixed name takes the patch's default
// namespace, as RFC 5261 says. Every selector must match exactly one
// element.
func ApplyPatch(doc, patch []byte) ([]byte, error) {
	target, err := readXML(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: document: %v", ErrPatch, err)
	}
	p, err := readXML(patch)
	if err != nil {
		return nil, fmt.Errorf("%w: patch: %v", ErrPatch, err)
	}
	root := p.Root()
	if root.Tag != "patch" || elementNS(root) != PatchNS {
		return nil, fmt.Errorf("%w: root is <%s>, want <patch xmlns=%q>", ErrPatch, root.FullTag(), PatchNS)
	}
	ops := root.ChildElements()
	if len(ops) > maxPatchOps {
		return nil, fmt.Errorf("%w: more than %d operations", ErrPatch, maxPatchOps)
	}
	for i, op := range ops {
		if err := applyOp(target, op); err != nil {
			return nil, fmt.Errorf("%w: operation %d (<%s>): %v", ErrPatch, i+1, op.Tag, err)
		}
	}
	target.WriteSettings = writeSettings
	out, err := target.WriteToBytes()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPatch, err)
	}
	return out, nil
}

func applyOp(doc *etree.Document, op *etree.Element) error {
	if elementNS(op) != PatchNS {
		return fmt.Errorf("operation not in the %s namespace", PatchNS)
	}
	sel := op.SelectAttr("sel")
	if sel == nil {
		return errors.New("no sel attribute")
	}
	if op.Tag == "add" && op.SelectAttr("type") != nil {
		return errors.New("adding attributes or namespaces is not supported")
	}
	el, err := selectOne(doc, op, sel.Value)
	if err != nil {
		return err
	}
	switch op.Tag {
	case "add":
		parent, at := el, len(el.Child)
		switch pos := op.SelectAttrValue("pos", ""); pos {
		case "", "append":
		case "prepend":
			at = 0
		case "before", "after":
			parent = el.Parent()
			if parent == nil || parent.Parent() == nil && parent.Tag == "" {
				return errors.New("cannot add a sibling of the root element")
			}
			at = el.Index()
			if pos == "after" {
				at++
			}
		default:
			return fmt.Errorf("unknown pos %q", pos)
		}
		for _, t := range op.Child {
			switch t := t.(type) {
			case *etree.Element:
				importElement(t, parent, at)
			case *etree.CharData:
				parent.InsertChildAt(at, etree.NewText(t.Data))
			case *etree.Comment:
				parent.InsertChildAt(at, etree.NewComment(t.Data))
			default:
				continue
			}
			at++
		}
	case "remove":
		parent := el.Parent()
		if parent == nil || isDocRoot(doc, el) {
			return errors.New("cannot remove the root element")
		}
		idx := el.Index()
		parent.RemoveChildAt(idx)
		removeWhitespace(parent, idx, op.SelectAttrValue("ws", ""))
	case "replace":
		var repl *etree.Element
		for _, c := range op.ChildElements() {
			if repl != nil {
				return errors.New("replace needs exactly one element")
			}
			repl = c
		}
		if repl == nil {
			return errors.New("replace needs exactly one element")
		}
		parent := el.Parent()
		if parent == nil {
			return errors.New("cannot replace this element")
		}
		idx := el.Index()
		parent.RemoveChildAt(idx)
		importElement(repl, parent, idx)
	default:
		return fmt.Errorf("unknown operation <%s>", op.Tag)
	}
	return nil
}

func isDocRoot(doc *etree.Document, el *etree.Element) bool { return doc.Root() == el }

// removeWhitespace drops the white-space text node before and/or after
// index (RFC 5261 ws="before|after|both").
func removeWhitespace(parent *etree.Element, idx int, ws string) {
	isWS := func(i int) bool {
		if i < 0 || i >= len(parent.Child) {
			return false
		}
		cd, ok := parent.Child[i].(*etree.CharData)
		return ok && cd.IsWhitespace()
	}
	if (ws == "after" || ws == "both") && isWS(idx) {
		parent.RemoveChildAt(idx)
	}
	if (ws == "before" || ws == "both") && isWS(idx-1) {
		parent.RemoveChildAt(idx - 1)
	}
}
