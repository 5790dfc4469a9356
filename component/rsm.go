package component

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"mellium.im/xmpp/paging"
	"mellium.im/xmpp/stanza"

	"github.com/pingd/pingd/hub"
)

// XEP-0059 Result Set Management on items retrieval (XEP-0060 §6.5.4): a
// <set xmlns="http://jabber.org/protocol/rsm"/> beside <items/> pages
// through the node's current items, newest first, as items retrieval
// returns them. The item ids are the UIDs. The answer carries <first/>
// (with its index), <last/> and <count/>. pingd keeps no state between
// pages: an <after/> or <before/> naming an item that is no longer current
// is item-not-found (XEP-0059 §2.4), an <index/> past the end an empty page.

const nsRSM = paging.NS

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
// (with its index, when known: first >= 0) and last item, when it has any,
// and the size of the whole result set. A page with items is mellium's
// paging.Set; an empty one carries only <count/> (XEP-0059 §2.6), which
// paging.Set cannot say: it always writes <first/> and <last/>.
func writePageResult(b *xmlBuf, page []hub.Event, first, count int) {
	if len(page) == 0 {
		b.open("set", "xmlns", nsRSM)
		b.element("count", strconv.Itoa(count))
		b.close("set")
		return
	}
	n := uint64(count)
	set := paging.Set{Last: page[len(page)-1].ItemID, Count: &n}
	set.First.ID = page[0].ItemID
	if first >= 0 {
		index := uint64(first)
		set.First.Index = &index
	}
	e := xml.NewEncoder(b)
	// Encoding to a buffer cannot fail.
	_, _ = set.WriteXML(e)
	_ = e.Flush()
}

// Paging through the service's disco#items reads one page of the nodes
// from the store (hub.NodePage), never the whole list: anyone may ask.
const (
	// maxNodeItemsPage is the most nodes one answer reads; the stanza
	// budget cuts it further.
	maxNodeItemsPage = 500
	// maxNodeItemsIndex bounds an <index/>, whose page is found by
	// skipping that many nodes; clients page on with <after/>.
	maxNodeItemsIndex = 10_000
)

// nodeItems writes the service's disco#items: a page of its nodes in name
// order, as pr asks (XEP-0059: the UIDs are node names; nil: the first
// page), cut to fit the stanza budget; a list with more nodes than it
// shows carries a result set the client pages on from. Its <count/> is
// the number of nodes counted at most a few seconds before (hub.NodeCount:
// XEP-0059 lets it be approximate), and <first/> has an index only when
// the request gave one or asked for the first page.
func (svc *service) nodeItems(ctx context.Context, b *xmlBuf, pr *pageRequest) error {
	size := maxNodeItemsPage
	if pr != nil && pr.Max >= 0 {
		size = min(pr.Max, maxNodeItemsPage)
	}
	// XEP-0059 §2.4: a UID that names no node is item-not-found.
	known := func(name string) error {
		if _, err := svc.hub.Node(ctx, name); errors.Is(err, hub.ErrNotFound) {
			return itemNotFound(fmt.Sprintf("no node %q to page from", name))
		} else if err != nil {
			return err
		}
		return nil
	}
	p := hub.NodePage{Limit: size + 1} // one more tells whether there are more
	first := 0
	switch {
	case pr == nil:
	case pr.HasAfter:
		if err := known(pr.After); err != nil {
			return err
		}
		p.After, first = pr.After, -1
	case pr.HasBefore:
		if pr.Before != "" {
			if err := known(pr.Before); err != nil {
				return err
			}
		}
		p.Backward, p.Before, first = true, pr.Before, -1
	case pr.Index > maxNodeItemsIndex:
		return newError(stanza.Cancel, stanza.FeatureNotImplemented, "",
			fmt.Sprintf("pages of the node list start at an <index/> of at most %d; page on with <after/>", maxNodeItemsIndex))
	case pr.Index >= 0:
		p.Offset, first = pr.Index, pr.Index
	}
	var nodes []hub.Node
	if size > 0 {
		var err error
		if nodes, err = svc.hub.NodesPage(ctx, p); err != nil {
			return err
		}
	}
	more := len(nodes) > size
	if more && p.Backward {
		nodes = nodes[1:] // the extra one is before the page
	} else if more {
		nodes = nodes[:size]
	}
	b.open("query", "xmlns", nsDiscoItems)
	room := svc.limit.bytes() - envelopeBytes - 1024
	cut := len(nodes)
	for i := range nodes {
		n := &nodes[i]
		size := len(`<item jid="" node="" name=""/>`) + escapedLen(svc.domainStr) + escapedLen(n.Name) + escapedLen(n.Title)
		if size > room {
			cut = i
			break
		}
		room -= size
		b.empty("item", "jid", svc.domainStr, "node", n.Name, "name", n.Title)
	}
	if pr != nil || cut < len(nodes) || more {
		count, err := svc.hub.NodeCount(ctx)
		if err != nil {
			return err
		}
		page := make([]hub.Event, cut) // writePageResult names items by ItemID
		for i := range page {
			page[i] = hub.Event{ItemID: nodes[i].Name}
		}
		writePageResult(b, page, first, count)
	}
	b.close("query")
	return nil
}
