package archtest

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The size rules: a port is a few methods its consumer calls, and no type
// of the core or of an adapter is a catch-all. They count what the
// production files declare.
const (
	// maxInterfaceMethods bounds an interface's method set (embedded
	// interfaces of the checked packages counted in).
	maxInterfaceMethods = 20
	// maxTypeMethods bounds the methods declared on one type, exported or
	// not, pointer or value receiver.
	maxTypeMethods = 40
)

// interfacePackages are where no interface may pass maxInterfaceMethods;
// typePackages where no type may pass maxTypeMethods; noStoreAssertions
// where a store value is never asserted to another interface (a capability
// is a port in Config, not a guess at run time).
var (
	interfacePackages = []string{"hub", "hub/fetching", "delivery", "component", "httpapi"}
	typePackages      = []string{"hub", "hub/fetching", "delivery", "component", "httpapi"}
	noStoreAssertions = []string{"httpapi"}
)

// parsedPackage is one package's production files.
type parsedPackage struct {
	fset  *token.FileSet
	files map[string]*ast.File // by path relative to the module root
}

// parseProduction parses the non-test Go files of the packages (paths
// relative to root).
func parseProduction(t *testing.T, root string, pkgs []string) map[string]parsedPackage {
	t.Helper()
	out := map[string]parsedPackage{}
	for _, pkg := range pkgs {
		fset := token.NewFileSet()
		p := parsedPackage{fset: fset, files: map[string]*ast.File{}}
		paths, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range paths {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			rel := filepath.ToSlash(filepath.Join(pkg, filepath.Base(path)))
			f, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			p.files[rel] = f
		}
		if len(p.files) == 0 {
			t.Fatalf("no production files in %s", pkg)
		}
		out[pkg] = p
	}
	return out
}

// sizeFindings returns one line per break of the size and assertion rules.
func sizeFindings(pkgs map[string]parsedPackage) []string {
	var found []string
	// Interfaces, by "pkg.Name", for resolving embedded ones.
	ifaces := map[string]*ast.InterfaceType{}
	imports := map[string]map[string]string{} // "pkg.Name" -> the declaring file's imports
	for pkg, p := range pkgs {
		for _, f := range p.files {
			imp := fileImports(f)
			for _, ts := range typeSpecs(f) {
				if it, ok := ts.Type.(*ast.InterfaceType); ok {
					ifaces[pkg+"."+ts.Name.Name] = it
					imports[pkg+"."+ts.Name.Name] = imp
				}
			}
		}
	}
	var methodSet func(key string, seen map[string]bool) map[string]bool
	methodSet = func(key string, seen map[string]bool) map[string]bool {
		set := map[string]bool{}
		it, ok := ifaces[key]
		if !ok || seen[key] {
			return set
		}
		seen[key] = true
		pkg := key[:strings.LastIndex(key, ".")]
		for _, m := range it.Methods.List {
			switch typ := m.Type.(type) {
			case *ast.FuncType:
				for _, n := range m.Names {
					set[n.Name] = true
				}
			case *ast.Ident:
				for n := range methodSet(pkg+"."+typ.Name, seen) {
					set[n] = true
				}
			case *ast.SelectorExpr:
				if x, ok := typ.X.(*ast.Ident); ok {
					if path, ok := imports[key][x.Name]; ok {
						for n := range methodSet(path+"."+typ.Sel.Name, seen) {
							set[n] = true
						}
					}
				}
			}
		}
		return set
	}
	for key := range ifaces {
		pkg := key[:strings.LastIndex(key, ".")]
		if !slices.Contains(interfacePackages, pkg) {
			continue
		}
		if n := len(methodSet(key, map[string]bool{})); n > maxInterfaceMethods {
			found = append(found, fmt.Sprintf("interface %s has %d methods", key, n))
		}
	}

	for pkg, p := range pkgs {
		if slices.Contains(typePackages, pkg) {
			counts := map[string]int{}
			for _, f := range p.files {
				for _, d := range f.Decls {
					if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && len(fd.Recv.List) == 1 {
						counts[receiverName(fd.Recv.List[0].Type)]++
					}
				}
			}
			for typ, n := range counts {
				if n > maxTypeMethods {
					found = append(found, fmt.Sprintf("%s.%s declares %d methods", pkg, typ, n))
				}
			}
		}
		if slices.Contains(noStoreAssertions, pkg) {
			for rel, f := range p.files {
				ast.Inspect(f, func(n ast.Node) bool {
					ta, ok := n.(*ast.TypeAssertExpr)
					if !ok || ta.Type == nil {
						return true
					}
					operand := exprText(p.fset, ta.X)
					if strings.Contains(strings.ToLower(operand), "store") {
						found = append(found, fmt.Sprintf("%s asserts a store value: %s.(%s)", rel, operand, exprText(p.fset, ta.Type)))
					}
					return true
				})
			}
		}
	}
	sort.Strings(found)
	return found
}

func typeSpecs(f *ast.File) []*ast.TypeSpec {
	var out []*ast.TypeSpec
	for _, d := range f.Decls {
		if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
			for _, s := range gd.Specs {
				out = append(out, s.(*ast.TypeSpec))
			}
		}
	}
	return out
}

// fileImports maps the names a file imports pingd packages under to their
// paths relative to the module.
func fileImports(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, is := range f.Imports {
		path, err := strconv.Unquote(is.Path.Value)
		if err != nil {
			continue
		}
		rel := relative(path)
		if rel == path {
			continue // not pingd's
		}
		name := rel[strings.LastIndex(rel, "/")+1:]
		if is.Name != nil {
			name = is.Name.Name
		}
		out[name] = rel
	}
	return out
}

// receiverName is the base type name of a method's receiver.
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return fmt.Sprintf("%T", e)
		}
	}
}

func exprText(fset *token.FileSet, e ast.Expr) string {
	var b bytes.Buffer
	printer.Fprint(&b, fset, e)
	return b.String()
}

// TestSizeRules: no port over maxInterfaceMethods, no type over
// maxTypeMethods, no store value asserted to a capability.
func TestSizeRules(t *testing.T) {
	pkgs := parseProduction(t, "../..", append(slices.Clone(interfacePackages), "upstream"))
	for _, f := range sizeFindings(pkgs) {
		t.Error(f)
	}
}

// TestSizeRulesCatchBreaks feeds the checker made-up packages breaking
// each rule, so TestSizeRules cannot pass because the checker sees
// nothing.
func TestSizeRulesCatchBreaks(t *testing.T) {
	var hubSrc, apiSrc strings.Builder
	hubSrc.WriteString("package hub\n\ntype Small interface {\n")
	for i := range 12 {
		fmt.Fprintf(&hubSrc, "\tA%d()\n", i)
	}
	hubSrc.WriteString("}\n\ntype Big interface {\n\tSmall\n")
	for i := range 12 {
		fmt.Fprintf(&hubSrc, "\tB%d()\n", i)
	}
	hubSrc.WriteString("}\n\ntype Wide struct{}\n\n")
	for i := range 41 {
		fmt.Fprintf(&hubSrc, "func (w *Wide) M%d() {}\n", i)
	}
	apiSrc.WriteString("package httpapi\n\nimport \"github.com/pingd/pingd/hub\"\n\n" +
		"type Store interface {\n\thub.Big\n}\n\n" +
		"func f(store any) { _, _ = store.(hub.Small) }\n")
	pkgs := map[string]parsedPackage{}
	for pkg, src := range map[string]string{"hub": hubSrc.String(), "httpapi": apiSrc.String()} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, pkg+"/x.go", src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		pkgs[pkg] = parsedPackage{fset: fset, files: map[string]*ast.File{pkg + "/x.go": f}}
	}
	want := []string{
		"httpapi/x.go asserts a store value: store.(hub.Small)",
		"hub.Wide declares 41 methods",
		"interface httpapi.Store has 24 methods",
		"interface hub.Big has 24 methods",
	}
	if got := sizeFindings(pkgs); !slices.Equal(got, want) {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
