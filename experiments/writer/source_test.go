package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/memcgd/memcgd/experiments/internal/lab"
)

// Nothing freezes or signals the reader here (TestMain turns the
// runtime's preemption signal off): /dev/zero fills every read, and the
// pipe's feeder sends exactly the bytes asked for.
func TestSourcesDeliverTheSizeAsked(t *testing.T) {
	const chunk, size = 64 << 10, 4 << 20
	for _, from := range []string{"zero", "pipe"} {
		src, err := openSource(from, chunk, size)
		if err != nil {
			t.Fatal(err)
		}
		var r lab.WriterResult
		buf := make([]byte, chunk)
		var got uint64
		for got < size {
			n, err := src.read(buf[:min(chunk, size-got)], &r, time.Now())
			if err != nil {
				t.Fatalf("%s: read at %d: %v", from, got, err)
			}
			got += n
		}
		short, err := src.close()
		if err != nil || short != 0 {
			t.Errorf("%s: close = %d short feeder writes, %v; want none", from, short, err)
		}
		if from == "zero" && (r.Reads != size/chunk || r.ShortReads != 0) {
			t.Errorf("zero: %d reads, %d short, want %d full reads", r.Reads, r.ShortReads, size/chunk)
		}
		if r.ShortReads > r.Reads || len(r.ShortReadsAt) != int(min(r.ShortReads, lab.MaxShortReadsAt)) {
			t.Errorf("%s: %d short reads of %d, %d times kept", from, r.ShortReads, r.Reads, len(r.ShortReadsAt))
		}
	}
}

func TestWriteAllCountsItsWrites(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r lab.WriterResult
	if err := writeAll(int(f.Fd()), make([]byte, 1<<20), &r); err != nil {
		t.Fatal(err)
	}
	if r.Writes != 1 || r.ShortWrites != 0 {
		t.Errorf("one 1 MiB write to a file: %d writes, %d short; want 1, 0", r.Writes, r.ShortWrites)
	}
	if st, _ := f.Stat(); st.Size() != 1<<20 {
		t.Errorf("file holds %d bytes, want 1 MiB", st.Size())
	}
}
