package strictyaml

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// FuzzParse: Parse and Check never panic, and a syntax error's line is a
// line of the document.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"version: 1\ndefaults: {dirty_ratio: 10\n",
		"a: 1\nb:\n  c: 1\n  - e\n",
		"- a\n- b\nc: d\n",
		"a: b: c\n",
		"rules: [{match: /a, set: {limt: 1}}]\n",
		"a: &x [*x]\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse([]byte(s))
		var se *SyntaxError
		if errors.As(err, &se) {
			if lines := yamlLines(s); se.Line < 0 || se.Line > lines {
				t.Fatalf("syntax error at line %d of a %d-line document", se.Line, lines)
			}
			return
		}
		if err != nil {
			return
		}
		_ = Check(n, reflect.TypeFor[*doc]())
	})
}

// yamlLines counts lines as YAML 1.1 breaks them: at \r\n, \r, \n, and
// U+0085, U+2028, U+2029 (yaml.v3's scanner counts them all).
func yamlLines(s string) int {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	n := 1
	for _, r := range s {
		switch r {
		case '\r', '\n', '\u0085', '\u2028', '\u2029':
			n++
		}
	}
	return n
}

// The search for the line finds it in a long document too.
func TestSyntaxErrorInALongDocument(t *testing.T) {
	const searchLines = 5000
	doc := strings.Repeat("key: value\n", searchLines-1) + "last: [1, 2\n"
	start := time.Now()
	_, err := Parse([]byte(doc))
	var se *SyntaxError
	if !errors.As(err, &se) || se.Line != searchLines {
		t.Fatalf("Parse = %v, want a syntax error on line %d", err, searchLines)
	}
	t.Logf("%d lines, yaml.v3's line near the end: %v", searchLines, time.Since(start))

	// Worst case: yaml.v3 gives no line, the search starts at line 1.
	doc = strings.Repeat("key: value\n", searchLines-1) + "last: *nope\n"
	start = time.Now()
	if _, err := Parse([]byte(doc)); !errors.As(err, &se) || se.Line != searchLines {
		t.Fatalf("Parse = %v, want an error on line %d", err, searchLines)
	}
	t.Logf("%d lines, no line from yaml.v3: %v", searchLines, time.Since(start))
}
