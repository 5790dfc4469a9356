package main

import (
	"os"
	"strings"
	"testing"
)

// TestDocsListEveryOption keeps the option tables of the README and the
// operating guide true to the code.
func TestDocsListEveryOption(t *testing.T) {
	for _, file := range []string{"../../README.md", "../../docs/operating.md"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range (&Config{}).options() {
			row := "| `" + o.env + "` | `--" + o.name + "` |"
			if !strings.Contains(string(b), row) {
				t.Errorf("%s has no table row for %s (--%s)", file, o.env, o.name)
			}
		}
	}
}
