package main

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestOnDemandWritesEachCountInOneCallAndPrintsWhen(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out strings.Builder
	if err := onDemand(f, strings.NewReader("4096\n10\n"), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || lines[0] != "ready" {
		t.Fatalf("output %q, want ready and two times", out.String())
	}
	t1, err1 := strconv.ParseInt(lines[1], 10, 64)
	t2, err2 := strconv.ParseInt(lines[2], 10, 64)
	if err1 != nil || err2 != nil || t1 <= 0 || t2 < t1 {
		t.Errorf("times %q, %q: want increasing CLOCK_MONOTONIC nanoseconds", lines[1], lines[2])
	}
	if st, err := f.Stat(); err != nil || st.Size() != 4106 {
		t.Errorf("file size %v (%v), want 4106", st.Size(), err)
	}
}

func TestOnDemandRefusesABadCount(t *testing.T) {
	for _, in := range []string{"x\n", "0\n", "-5\n", "2000000000\n"} {
		f, err := os.Create(filepath.Join(t.TempDir(), "f"))
		if err != nil {
			t.Fatal(err)
		}
		err = onDemand(f, strings.NewReader(in), io.Discard)
		f.Close()
		if err == nil || !strings.Contains(err.Error(), "line 1: invalid byte count") {
			t.Errorf("onDemand(%q) = %v, want an error naming line 1 and the count", in, err)
		}
	}
}

func TestPacerKeepsWithinItsBudget(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "paced"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const chunk, budget = 64 << 10, 256 << 10
	p := pacer{fd: int(f.Fd()), budget: budget, chunk: chunk}
	buf := make([]byte, chunk)
	for off := uint64(0); off < 4<<20; off += chunk {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
		if err := p.wrote(off, chunk); err != nil {
			t.Fatalf("wrote(%d): %v", off, err)
		}
		if out := off + chunk - p.waited; out > budget {
			t.Fatalf("after the write at %d: %d bytes not yet waited for, budget %d", off, out, budget)
		}
	}
	if p.waited != 4<<20-budget {
		t.Errorf("waited for the file up to %d, want %d: all but the budget", p.waited, 4<<20-budget)
	}
}

func TestPacerWithoutBudgetDoesNothing(t *testing.T) {
	p := pacer{fd: -1} // a bad fd: any sync_file_range would fail
	if err := p.wrote(0, 1<<20); err != nil {
		t.Errorf("wrote with no budget: %v", err)
	}
}
