package component

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// scanWatch is the store under a hub that records what the lists of nodes
// cost: whether anything read every node (Nodes) or looked up
// affiliations one node at a time, and the largest page asked for.
type scanWatch struct {
	store.Store
	mu            sync.Mutex
	wholeLists    int
	perNodeAffs   int
	largestPage   int
	pagesRequests int
}

func (w *scanWatch) Nodes(ctx context.Context) ([]hub.Node, error) {
	w.mu.Lock()
	w.wholeLists++
	w.mu.Unlock()
	return w.Store.Nodes(ctx)
}

func (w *scanWatch) NodesPage(ctx context.Context, p hub.NodePage) ([]hub.Node, error) {
	w.mu.Lock()
	w.pagesRequests++
	w.largestPage = max(w.largestPage, p.Limit)
	w.mu.Unlock()
	return w.Store.NodesPage(ctx, p)
}

func (w *scanWatch) Affiliation(ctx context.Context, nodeID int64, j string) (hub.Affiliation, error) {
	w.mu.Lock()
	w.perNodeAffs++
	w.mu.Unlock()
	return w.Store.Affiliation(ctx, nodeID, j)
}

func (w *scanWatch) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wholeLists, w.perNodeAffs, w.largestPage, w.pagesRequests = 0, 0, 0, 0
}

// newListService is a service on a real SQLite store holding count nodes,
// node-0000 and on, under a scanWatch, with the smallest stanza budget.
func newListService(t *testing.T, count int) (*service, *scanWatch, store.Store) {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "pingd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for i := range count {
		n := &hub.Node{Name: fmt.Sprintf("node-%04d", i), NodeConfig: hub.DefaultNodeConfig()}
		n.Title = strings.Repeat("Title ", 10)
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	w := &scanWatch{Store: st}
	h, err := hub.New(hub.Config{Stores: store.HubStores(w), Admins: []string{"admin@example.org"}})
	if err != nil {
		t.Fatal(err)
	}
	access := nodeAccess{hub: h}
	svc := &service{sharedState: &sharedState{hub: h, domainStr: "pubsub.example.org", limit: &stanzaLimit{}}, access: access,
		chat: &chatCommands{subscriptionTargets: &subscriptionTargets{nodeAccess: access}, domainStr: "pubsub.example.org"}}
	svc.limit.learned.Store(minStanzaBudget)
	return svc, w, st
}

// The service's disco#items reads one page of the nodes at a time, never
// the whole list, and a list with more nodes than one answer carries a
// result set (XEP-0059) the client pages on from, within the budget, to
// the last node.
func TestNodeItemsArePaged(t *testing.T) {
	const count = 1200
	svc, w, _ := newListService(t, count)
	ctx := t.Context()
	seen := 0
	var pr *pageRequest
	for pages := 0; seen < count; pages++ {
		if pages > 100 {
			t.Fatal("paging does not end")
		}
		var b xmlBuf
		if err := svc.nodeItems(ctx, &b, pr); err != nil {
			t.Fatal(err)
		}
		if b.Len() > minStanzaBudget-envelopeBytes {
			t.Fatalf("disco#items of %d bytes, over the budget", b.Len())
		}
		el, err := parseDocument(b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		items := el.childrenNamed(nsDiscoItems, "item")
		if len(items) == 0 {
			t.Fatalf("an empty page at %d of %d", seen, count)
		}
		if first, want := items[0].attr("node"), fmt.Sprintf("node-%04d", seen); first != want {
			t.Fatalf("page starts at %s, want %s", first, want)
		}
		seen += len(items)
		set := el.child(nsRSM, "set")
		if seen < count && (set == nil || set.child(nsRSM, "count").text() != fmt.Sprint(count)) {
			t.Fatalf("a cut list without a result set: %.300s", b.Bytes())
		}
		if pages == 0 && set.child(nsRSM, "first").attr("index") != "0" {
			t.Errorf("the first page's <first/> has no index 0: %s", set.standalone())
		}
		if set != nil {
			pr = &pageRequest{Max: -1, Index: -1, HasAfter: true, After: set.child(nsRSM, "last").text()}
		}
	}
	if seen != count {
		t.Fatalf("paged through %d nodes, want %d", seen, count)
	}
	if w.wholeLists != 0 || w.largestPage > maxNodeItemsPage+1 {
		t.Fatalf("disco#items read the whole list %d times, pages of up to %d nodes", w.wholeLists, w.largestPage)
	}

	// The last page, a page before a node, by index, and a name that is
	// no node.
	page := func(pr *pageRequest) []string {
		t.Helper()
		var b xmlBuf
		if err := svc.nodeItems(ctx, &b, pr); err != nil {
			t.Fatal(err)
		}
		el, err := parseDocument(b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, it := range el.childrenNamed(nsDiscoItems, "item") {
			names = append(names, it.attr("node"))
		}
		return names
	}
	if got := page(&pageRequest{Max: 2, Index: -1, HasBefore: true}); fmt.Sprint(got) != "[node-1198 node-1199]" {
		t.Errorf("the last page: %v", got)
	}
	if got := page(&pageRequest{Max: 2, Index: -1, HasBefore: true, Before: "node-0100"}); fmt.Sprint(got) != "[node-0098 node-0099]" {
		t.Errorf("the page before node-0100: %v", got)
	}
	if got := page(&pageRequest{Max: 2, Index: 7}); fmt.Sprint(got) != "[node-0007 node-0008]" {
		t.Errorf("the page at index 7: %v", got)
	}
	var b xmlBuf
	if err := svc.nodeItems(ctx, &b, &pageRequest{Max: 2, Index: -1, HasAfter: true, After: "nope"}); err == nil ||
		!strings.Contains(err.Error(), "item-not-found") {
		t.Errorf("after a name that is no node: %v", err)
	}
	if w.wholeLists != 0 {
		t.Fatalf("paging read the whole list %d times", w.wholeLists)
	}
}

// The chat command "nodes" (and the ad-hoc command) shows one page read as
// one, with the number of nodes.
func TestChatNodesReadsOnePage(t *testing.T) {
	svc, w, _ := newListService(t, maxNodesInListing+50)
	answer, err := svc.chat.chatNodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(answer, fmt.Sprintf("%d node(s):", maxNodesInListing+50)) || !strings.Contains(answer, "… and 50 more") ||
		!strings.Contains(answer, "node-0000") || strings.Contains(answer, fmt.Sprintf("node-%04d", maxNodesInListing)) {
		t.Fatalf("answer:\n%.400s\n…%s", answer, answer[max(0, len(answer)-200):])
	}
	if w.wholeLists != 0 || w.largestPage > maxNodesInListing+1 {
		t.Fatalf("the chat command read the whole list %d times, pages of up to %d nodes", w.wholeLists, w.largestPage)
	}
}

// Retrieving one's affiliations without naming a node (XEP-0060 §5.7) is
// one query for the JID's own, not a look-up per node; admins, who own
// every node, still get every node.
func TestOwnAffiliationsOneQuery(t *testing.T) {
	svc, w, st := newListService(t, 300)
	ctx := t.Context()
	for name, a := range map[string]hub.Affiliation{"node-0007": hub.AffOwner, "node-0123": hub.AffMember, "node-0200": hub.AffOutcast} {
		n, err := st.Node(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SetAffiliation(ctx, n.ID, "alice@example.org", a); err != nil {
			t.Fatal(err)
		}
	}
	affs := func(sender string) []string {
		t.Helper()
		var b xmlBuf
		if err := svc.ownAffiliations(ctx, &b, jid.MustParse(sender), &request{}); err != nil {
			t.Fatal(err)
		}
		el, err := parseDocument(b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range el.child(nsPubsub, "affiliations").childrenNamed(nsPubsub, "affiliation") {
			out = append(out, a.attr("node")+"="+a.attr("affiliation"))
		}
		return out
	}
	w.reset()
	if got := affs("alice@example.org/phone"); fmt.Sprint(got) != "[node-0007=owner node-0123=member node-0200=outcast]" {
		t.Errorf("alice's affiliations: %v", got)
	}
	if got := affs("stranger@example.org/x"); len(got) != 0 {
		t.Errorf("a stranger's affiliations: %v", got)
	}
	if w.wholeLists != 0 || w.perNodeAffs != 0 {
		t.Fatalf("retrieving affiliations read the whole list %d times and %d affiliations one by one", w.wholeLists, w.perNodeAffs)
	}
	if got := affs("admin@example.org/x"); len(got) != 300 || got[0] != "node-0000=owner" {
		t.Errorf("the admin's affiliations: %d, %.3v", len(got), got)
	}
}
