package format

import (
	"bytes"
	"fmt"
)

// nextLine returns the first line of b, without its newline, and the rest.
func nextLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

// keyValue splits a "key value" line as printed by the kernel's seq_file
// helpers (one space; memory.stat uses seq_buf_printf("%s %llu\n")).
func keyValue(line []byte) (key, value []byte, ok bool) {
	i := bytes.IndexByte(line, ' ')
	if i <= 0 || i == len(line)-1 {
		return nil, nil, false
	}
	return line[:i], line[i+1:], true
}

// lineError reports a line that does not have the shape the kernel prints.
// It is the only allocation of a parse, and only on bad input.
func lineError(file string, n int, line []byte, want string) error {
	const max = 80
	if len(line) > max {
		line = line[:max]
	}
	return fmt.Errorf("%s line %d %q: want %s", file, n, line, want)
}
