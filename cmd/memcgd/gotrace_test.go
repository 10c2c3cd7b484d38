package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// --go-trace writes a Go execution trace, and never writes over a file
// that is there already (the daemon runs as root).
func TestGoTrace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trace")
	stop, err := startGoTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("go 1.")) {
		t.Errorf("trace file starts %q, want the Go trace header \"go 1.\"", b[:min(len(b), 16)])
	}
	if _, err := startGoTrace(path); !errors.Is(err, os.ErrExist) {
		t.Errorf("startGoTrace over an existing file = %v, want an error wrapping os.ErrExist", err)
	}
}
