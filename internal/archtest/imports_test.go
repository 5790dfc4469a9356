package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

// module is pingd's module path; rules name packages relative to it.
const module = "github.com/pingd/pingd"

// leaves know nothing of pingd: they import no pingd package but other
// leaves, so any package may use them.
var leaves = []string{
	"internal/httpout",
	"internal/linkheader",
	"internal/metrics",
	"internal/netguard",
	"internal/opml",
	"internal/ratelimit",
	"internal/reconnect",
	"internal/soap",
	"internal/xmlguard",
	"internal/xmlrpc",
	"internal/xmppaddr",
}

// vocabulary are the protocol packages: each protocol's names, parsers and
// encoders, shared by the sides that receive and send it. They speak of
// hub's types and no other pingd package's, and never of each other.
var vocabulary = []string{
	"internal/cnws",
	"internal/getpingd",
	"internal/nodeurl",
	"internal/rsscloud",
	"internal/weblogs",
	"internal/websub",
}

// A rule says which pingd packages a package's production code may import.
// Anything not listed is refused, so a new import across the layers (or a
// new package) fails until the rule and docs/architecture.md say so.
type rule struct {
	pkg string   // relative to module, e.g. "hub"
	may []string // relative to module
	why string   // what the rule keeps, shown when it breaks
}

func join(lists ...[]string) []string {
	var all []string
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}

// everything but the given packages: for the entry points, which wire the
// rest together.
func allBut(graph map[string][]string, not ...string) []string {
	var all []string
	for pkg := range graph {
		if !slices.Contains(not, pkg) {
			all = append(all, pkg)
		}
	}
	return all
}

// rules are the import rules of docs/architecture.md, as they hold today.
// graph is the module's packages (for the entry points' "all but" rules).
func rules(graph map[string][]string) []rule {
	rs := []rule{
		{"hub", nil, "the hub is transport-free and imports no other pingd package"},
		{"hub/fetching", []string{"hub"}, "the fetch engine speaks only the hub's vocabulary; the fetcher (feed) and the store reach it through the ports it declares"},
		{"component", join([]string{"hub"}, leaves), "the XMPP side reaches the rest only through the hub; it never imports httpapi, delivery, store or feed"},
		{"httpapi", join([]string{"hub", "feed", "discovery", "whitelist"}, vocabulary, leaves), "the HTTP side never imports component, upstream, delivery or store: what a ping sets off beyond the hub (the relay) is a ping listener cmd/pingd registers, and what it reads of the store it declares and is given"},
		{"upstream", join([]string{"hub", "discovery"}, vocabulary, leaves), "upstream subscriptions reach the rest only through the hub"},
		{"delivery", join([]string{"hub", "feed"}, vocabulary, leaves), "delivery listens to the hub; it does not import discovery, httpapi, component or store"},
		{"whitelist", join([]string{"hub"}, vocabulary, leaves), "whitelist decisions go through the hub"},
		{"discovery", join([]string{"hub"}, vocabulary, leaves), "discovery documents need only the hub's types and the protocols' names"},
		{"feed", join([]string{"hub"}, vocabulary, leaves), "fetching and parsing need only the hub's types"},
		{"store", join([]string{"hub"}, leaves), "the store implements the ports its users declare and imports the hub and leaves only"},
		{"store/storetest", join([]string{"hub", "store"}, leaves), "the conformance suite runs store.Store implementations"},
		{"internal/testenv", leaves, "test environments start real parts, not pingd's packages"},
		{"internal/archtest", nil, "the rules belong to no package"},
		{"cmd/pingd", allBut(graph, "cmd/pingd", "bench", "store/storetest", "internal/testenv"), "main wires everything; test helpers stay out of the binary"},
		{"bench", allBut(graph, "bench", "cmd/pingd", "store/storetest"), "the harness calls pingd's exported APIs; nothing imports it"},
	}
	for _, v := range vocabulary {
		rs = append(rs, rule{v, []string{"hub", "internal/xmlrpc", "internal/soap", "internal/xmlguard", "internal/linkheader"},
			"a protocol package imports no pingd package but hub and the XML-RPC, SOAP, XML guard and Link header leaves"})
	}
	for _, l := range leaves {
		rs = append(rs, rule{l, leaves, "a leaf imports no pingd package but other leaves"})
	}
	return rs
}

// check returns one line per import that breaks its package's rule, and one
// per package that has no rule. graph maps each package (relative to
// module) to the pingd packages it imports (relative as well).
func check(graph map[string][]string, rs []rule) []string {
	byPkg := make(map[string]rule, len(rs))
	for _, r := range rs {
		byPkg[r.pkg] = r
	}
	var broken []string
	for pkg, imports := range graph {
		r, ok := byPkg[pkg]
		if !ok {
			broken = append(broken, fmt.Sprintf("%s has no import rule: add one to internal/archtest and docs/architecture.md", pkg))
			continue
		}
		for _, imp := range imports {
			if imp == pkg || slices.Contains(r.may, imp) {
				continue
			}
			broken = append(broken, fmt.Sprintf("%s imports %s, which its rule does not allow (%s)", pkg, imp, r.why))
		}
	}
	sort.Strings(broken)
	return broken
}

// moduleGraph lists the module's packages with go list and returns, for
// each, the pingd packages its non-test files import.
func moduleGraph(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Error", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	graph := make(map[string][]string)
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		pkg := relative(p.ImportPath)
		graph[pkg] = nil // a package importing no pingd package still needs a rule
		for _, imp := range p.Imports {
			if rel := relative(imp); rel != imp {
				graph[pkg] = append(graph[pkg], rel)
			}
		}
	}
	if len(graph) < 10 {
		t.Fatalf("go list found %d packages; expected the whole module", len(graph))
	}
	return graph
}

// relative strips the module path; other paths come back as they are.
func relative(path string) string {
	if path == module {
		return "."
	}
	if rest, ok := strings.CutPrefix(path, module+"/"); ok {
		return rest
	}
	return path
}

func TestImportRules(t *testing.T) {
	graph := moduleGraph(t)
	for _, b := range check(graph, rules(graph)) {
		t.Error(b)
	}
}

// TestCheckCatchesBrokenRules feeds the checker a made-up graph breaking
// each kind of rule, so TestImportRules cannot pass because the checker
// sees nothing.
func TestCheckCatchesBrokenRules(t *testing.T) {
	graph := map[string][]string{
		"hub":                 {"store"},
		"hub/fetching":        {"hub", "feed"},
		"component":           {"hub", "httpapi", "internal/reconnect"},
		"httpapi":             {"hub", "component", "store"},
		"delivery":            {"hub", "discovery"},
		"store":               {"hub", "feed"},
		"internal/cnws":       {"hub", "internal/websub"},
		"internal/netguard":   {"hub"},
		"upstream":            {"cmd/pingd"},
		"cmd/pingd":           {"hub", "internal/testenv"},
		"internal/newthing":   {"hub"},
		"discovery":           {"hub", "internal/nodeurl"},
		"internal/reconnect":  nil,
		"internal/websub":     {"hub"},
		"internal/testenv":    nil,
		"feed":                {"hub", "internal/xmlguard"},
		"internal/xmlguard":   nil,
		"internal/nodeurl":    {"hub"},
		"whitelist":           {"hub", "internal/xmppaddr"},
		"internal/xmppaddr":   nil,
		"store/storetest":     {"hub", "store"},
		"bench":               {"hub", "internal/testenv"},
		"internal/archtest":   nil,
		"internal/linkheader": nil,
	}
	want := []string{
		"cmd/pingd imports internal/testenv",
		"component imports httpapi",
		"delivery imports discovery",
		"httpapi imports component",
		"httpapi imports store",
		"hub imports store",
		"hub/fetching imports feed",
		"internal/cnws imports internal/websub",
		"internal/netguard imports hub",
		"internal/newthing has no import rule",
		"store imports feed",
		"upstream imports cmd/pingd",
	}
	got := check(graph, rules(graph))
	if len(got) != len(want) {
		t.Errorf("got %d broken rules, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range min(len(got), len(want)) {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("broken rule %d: got %q, want it to start with %q", i, got[i], want[i])
		}
	}

	// The same graph without its wrong imports passes.
	clean := map[string][]string{
		"hub":                nil,
		"component":          {"hub", "internal/reconnect"},
		"httpapi":            {"hub", "internal/websub"},
		"store":              {"hub", "internal/reconnect"},
		"internal/websub":    {"hub"},
		"internal/reconnect": nil,
		"cmd/pingd":          {"hub", "component", "httpapi", "store"},
	}
	if got := check(clean, rules(clean)); len(got) > 0 {
		t.Errorf("a graph keeping the rules broke them:\n%s", strings.Join(got, "\n"))
	}
}

// TestArchitectureNamesEveryPackage keeps docs/architecture.md's layers
// complete: every package of the module is named there.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	for pkg := range moduleGraph(t) {
		if !strings.Contains(string(doc), "`"+pkg+"`") {
			t.Errorf("docs/architecture.md does not name `%s`", pkg)
		}
	}
}
