package feed

import (
	"strings"

	"github.com/beevik/etree"
)

// Namespace handling for elements moved between etree documents: etree
// keeps prefixes as written and resolves them through the xmlns attributes
// of the ancestors, so an element copied into another tree must carry the
// declarations it relied on.

// namespaceURI resolves prefix ("" for the default namespace) in the scope
// of e; ok is false when it is not declared.
func namespaceURI(e *etree.Element, prefix string) (uri string, ok bool) {
	switch prefix {
	case "xml":
		return "http://www.w3.org/XML/1998/namespace", true
	case "xmlns":
		return "", false
	}
	for el := e; el != nil; el = el.Parent() {
		for _, a := range el.Attr {
			if prefix == "" && a.Space == "" && a.Key == "xmlns" {
				return a.Value, true
			}
			if prefix != "" && a.Space == "xmlns" && a.Key == prefix {
				return a.Value, true
			}
		}
	}
	if prefix == "" {
		return "", true // no default namespace
	}
	return "", false
}

// elementNS is the namespace URI of e.
func elementNS(e *etree.Element) string {
	uri, _ := namespaceURI(e, e.Space)
	return uri
}

// importElement copies src (from any document) and appends or inserts it
// into dst at index (-1: append), declaring on the copy every namespace
// prefix the subtree uses whose binding differs at the new place.
func importElement(src, dst *etree.Element, index int) *etree.Element {
	cp := src.Copy()
	needed := map[string]string{}
	var walk func(orig *etree.Element)
	walk = func(orig *etree.Element) {
		prefixes := []string{orig.Space}
		for _, a := range orig.Attr {
			if a.Space != "" && a.Space != "xmlns" && a.Space != "xml" {
				prefixes = append(prefixes, a.Space)
			}
		}
		for _, p := range prefixes {
			if _, done := needed[p]; done {
				continue
			}
			if uri, ok := namespaceURI(orig, p); ok {
				needed[p] = uri
			}
		}
		for _, c := range orig.ChildElements() {
			walk(c)
		}
	}
	walk(src)
	if index < 0 || index > len(dst.Child) {
		dst.AddChild(cp)
	} else {
		dst.InsertChildAt(index, cp)
	}
	// Declarations the copy brought along that repeat the new place's.
	for i := len(cp.Attr) - 1; i >= 0; i-- {
		a := cp.Attr[i]
		prefix, isDecl := "", false
		switch {
		case a.Space == "" && a.Key == "xmlns":
			isDecl = true
		case a.Space == "xmlns":
			prefix, isDecl = a.Key, true
		}
		if !isDecl {
			continue
		}
		if have, ok := namespaceURI(dst, prefix); ok && have == a.Value {
			cp.Attr = append(cp.Attr[:i], cp.Attr[i+1:]...)
		}
	}
	for p, uri := range needed {
		if have, ok := namespaceURI(cp, p); ok && have == uri {
			continue
		}
		if p == "" {
			cp.CreateAttr("xmlns", uri)
		} else {
			cp.CreateAttr("xmlns:"+p, uri)
		}
	}
	return cp
}

// childText is the trimmed text of e's first child element with the local
// name tag.
func childText(e *etree.Element, tag string) string {
	for _, c := range e.ChildElements() {
		if c.Tag == tag {
			return strings.TrimSpace(c.Text())
		}
	}
	return ""
}
