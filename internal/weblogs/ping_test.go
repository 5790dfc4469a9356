package weblogs

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseTags feeds extendedPing's tag parameter: what it accepts is a
// bounded list of distinct, trimmed, valid UTF-8 tags without '|'.
func FuzzParseTags(f *testing.F) {
	f.Add("go|xmpp| Go |")
	f.Add("||\xff|" + strings.Repeat("x", 70))
	f.Fuzz(func(t *testing.T, v string) {
		tags, err := ParseTags(v)
		if err != nil {
			return
		}
		if len(tags) > MaxTags {
			t.Fatalf("%d tags", len(tags))
		}
		for i, tag := range tags {
			if tag == "" || tag != strings.TrimSpace(tag) || strings.Contains(tag, "|") || !utf8.ValidString(tag) || len(tag) > MaxTagBytes {
				t.Fatalf("tag %q", tag)
			}
			for _, other := range tags[:i] {
				if strings.EqualFold(other, tag) {
					t.Fatalf("tag %q twice", tag)
				}
			}
		}
	})
}
