package lab

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Table is a markdown table, printed with its columns aligned.
type Table struct {
	Header []string
	Rows   [][]string
}

// Add appends a row.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// String renders the table in markdown.
func (t *Table) String() string {
	width := make([]int, len(t.Header))
	for i, h := range t.Header {
		width[i] = max(utf8.RuneCountInString(h), 3)
	}
	for _, r := range t.Rows {
		for i, c := range r {
			if i < len(width) {
				width[i] = max(width[i], utf8.RuneCountInString(c))
			}
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for i := range width {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			fmt.Fprintf(&b, " %s%s |", c, strings.Repeat(" ", width[i]-utf8.RuneCountInString(c)))
		}
		b.WriteString("\n")
	}
	line(t.Header)
	b.WriteString("|")
	for _, w := range width {
		b.WriteString(strings.Repeat("-", w+2) + "|")
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		line(r)
	}
	return b.String()
}
