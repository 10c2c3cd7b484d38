package vm

import (
	"fmt"
	"strings"
)

// failedLines is how many lines of one failed test's output FailedOutput
// keeps: its first failedHead and its last failedLines-failedHead.
const (
	failedLines = 100
	failedHead  = 20
)

// FailedOutput returns the output of each top-level test in the go test
// -v output out that failed, or that began and never ended (a panic, a
// timeout), from its "=== RUN" line to its "--- FAIL" line: what a reader
// of a long, truncated log needs first. It is "" when no test failed.
func FailedOutput(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	var b strings.Builder
	emit := func(block []string) {
		if len(block) > failedLines {
			tail := block[len(block)-(failedLines-failedHead):]
			block = append(append(block[:failedHead:failedHead],
				fmt.Sprintf("[… %d lines]", len(block)-failedLines)), tail...)
		}
		b.WriteString(strings.Join(block, "\n"))
		b.WriteString("\n")
	}
	start := -1
	for i, line := range lines {
		switch {
		case strings.HasPrefix(line, "=== RUN   ") && !strings.Contains(line, "/"):
			start = i
		case strings.HasPrefix(line, "--- FAIL: "):
			if start < 0 {
				start = i
			}
			emit(lines[start : i+1])
			start = -1
		case strings.HasPrefix(line, "--- PASS: "), strings.HasPrefix(line, "--- SKIP: "):
			start = -1
		}
	}
	if start >= 0 {
		emit(lines[start:])
	}
	return b.String()
}
