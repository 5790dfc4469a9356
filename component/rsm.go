package component

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pingd/pingd/hub"
)

// XEP-0059 Result Set Management on items retrieval (XEP-0060 §6.5.4): a
// <set xmlns="http://jabber.org/protocol/rsm"/> beside <items/> pages
// through the node's current items, newest first, as items retrieval
// returns them. The item ids are the UIDs. The answer carries <first/>
// (with its index), <last/> and <count/>. pingd keeps no state between
// pages: an <after/> or <before/> naming an item that is no longer current
// is item-not-found (XEP-0059 §2.4), an <index/> past the end an empty page.

const nsRSM = "http://jabber.org/protocol/rsm"

// Limits of a page request: UIDs are item ids, numbers are small.
const (
	maxPageUIDBytes = maxItemIDBytes
	maxPageNumber   = 1 << 20
)

// pageRequest is a parsed <set/> of a request.
type pageRequest struct {
	// Max is the page size, -1 when not given (every item).
	Max int
	// After and Before are UIDs; HasBefore with an empty Before asks for
	// the last page.
	After, Before       string
	HasAfter, HasBefore bool
	// Index is the position of the page's first item, -1 when not given.
	Index int
}

// parsePageRequest reads a request's <set/>; malformed values are
// bad-request.
func parsePageRequest(set *element) (*pageRequest, *stanzaError) {
	pr := &pageRequest{Max: -1, Index: -1}
	number := func(el *element) (int, *stanzaError) {
		s := strings.TrimSpace(el.text())
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > maxPageNumber {
			return 0, badRequest("", "<%s/> of a result set must be a number from 0 to %d, not %q", el.Name.Local, maxPageNumber, s)
		}
		return n, nil
	}
	uid := func(el *element) (string, *stanzaError) {
		s := strings.TrimSpace(el.text())
		if len(s) > maxPageUIDBytes {
			return "", badRequest("", "<%s/> of a result set names an item id longer than %d bytes", el.Name.Local, maxPageUIDBytes)
		}
		return s, nil
	}
	var serr *stanzaError
	for _, ch := range set.Children {
		if ch.Name.Space != nsRSM {
			continue
		}
		switch ch.Name.Local {
		case "max":
			pr.Max, serr = number(ch)
		case "index":
			pr.Index, serr = number(ch)
		case "after":
			pr.HasAfter = true
			if pr.After, serr = uid(ch); serr == nil && pr.After == "" {
				serr = badRequest("", "<after/> of a result set names no item")
			}
		case "before":
			pr.HasBefore = true
			pr.Before, serr = uid(ch)
		}
		if serr != nil {
			return nil, serr
		}
	}
	if pr.HasAfter && pr.HasBefore {
		return nil, badRequest("", "a result set request has <after/> or <before/>, not both")
	}
	return pr, nil
}

// pageOf cuts the page the request asks for out of all (the whole result
// set, in order) and returns it with the index of its first item.
func pageOf(all []hub.Event, pr *pageRequest) (page []hub.Event, first int, serr *stanzaError) {
	count := len(all)
	size := count
	if pr.Max >= 0 {
		size = pr.Max
	}
	position := func(uid string) (int, *stanzaError) {
		for i, ev := range all {
			if ev.ItemID == uid {
				return i, nil
			}
		}
		return 0, itemNotFound(fmt.Sprintf("no current item %q to page from", uid))
	}
	start := 0
	switch {
	case pr.HasAfter:
		pos, serr := position(pr.After)
		if serr != nil {
			return nil, 0, serr
		}
		start = pos + 1
	case pr.HasBefore:
		end := count
		if pr.Before != "" {
			pos, serr := position(pr.Before)
			if serr != nil {
				return nil, 0, serr
			}
			end = pos
		}
		start = max(0, end-size)
		return all[start:end], start, nil
	case pr.Index >= 0:
		start = min(pr.Index, count)
	}
	end := min(count, start+size)
	return all[start:end], start, nil
}

// writePageResult writes the <set/> of an answer: the page's first item
// (with its index) and last item, when it has any, and the size of the
// whole result set.
func writePageResult(b *xmlBuf, page []hub.Event, first, count int) {
	b.open("set", "xmlns", nsRSM)
	if len(page) > 0 {
		b.element("first", page[0].ItemID, "index", strconv.Itoa(first))
		b.element("last", page[len(page)-1].ItemID)
	}
	b.element("count", strconv.Itoa(count))
	b.close("set")
}

// nodeItems writes the service's disco#items: its nodes, paged by pr
// (XEP-0059: the UIDs are node names) and cut to fit the stanza budget;
// a cut list carries a result set the client pages on from.
func (svc *service) nodeItems(b *xmlBuf, nodes []hub.Node, pr *pageRequest) error {
	all := make([]hub.Event, len(nodes)) // pageOf pages by ItemID
	for i, n := range nodes {
		all[i] = hub.Event{ItemID: n.Name}
	}
	page, first := all, 0
	if pr != nil {
		var serr *stanzaError
		if page, first, serr = pageOf(all, pr); serr != nil {
			return serr
		}
	}
	b.open("query", "xmlns", nsDiscoItems)
	room := svc.limit.bytes() - envelopeBytes - 1024
	cut := len(page)
	for i := range page {
		n := &nodes[first+i]
		size := len(`<item jid="" node="" name=""/>`) + escapedLen(svc.domainStr) + escapedLen(n.Name) + escapedLen(n.Title)
		if size > room {
			cut = i
			break
		}
		room -= size
		b.empty("item", "jid", svc.domainStr, "node", n.Name, "name", n.Title)
	}
	if pr != nil || cut < len(page) {
		writePageResult(b, page[:cut], first, len(all))
	}
	b.close("query")
	return nil
}
