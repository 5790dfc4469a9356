package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsListEveryOption keeps the one options table, the operating
// guide's, true to the code, and the README pointing to it rather than
// keeping a second table that drifts.
func TestDocsListEveryOption(t *testing.T) {
	b, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range (&Config{}).options() {
		row := "| `" + o.env + "` | `--" + o.name + "` |"
		if !strings.Contains(string(b), row) {
			t.Errorf("docs/operating.md has no table row for %s (--%s)", o.env, o.name)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "| `PINGD_") {
			t.Errorf("README.md keeps an options table row (the table is docs/operating.md's; link to it): %s", line)
		}
	}
	if !strings.Contains(string(readme), "docs/operating.md#options") {
		t.Error("README.md does not link to the options table of docs/operating.md")
	}
}

var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdInline = regexp.MustCompile("`([A-Za-z0-9_./-]+\\.md)`")
)

// TestDocsReferOnlyToTheRepository: every file the README and docs/ link
// to or name (`X.md`) is in the repository.
func TestDocsReferOnlyToTheRepository(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range append(docs, "../../README.md") {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		var refs []string
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			refs = append(refs, m[1])
		}
		for _, m := range mdInline.FindAllStringSubmatch(string(b), -1) {
			refs = append(refs, m[1])
		}
		for _, ref := range refs {
			if strings.Contains(ref, "://") || strings.HasPrefix(ref, "#") || strings.HasPrefix(ref, "mailto:") {
				continue
			}
			path, _, _ := strings.Cut(ref, "#")
			// Relative to the document, or named from the repository's root.
			if _, err := os.Stat(filepath.Join(filepath.Dir(doc), path)); err == nil {
				continue
			}
			if _, err := os.Stat(filepath.Join("../..", path)); err == nil {
				continue
			}
			t.Errorf("%s refers to %s, which is not in the repository", filepath.Base(doc), ref)
		}
	}
}
