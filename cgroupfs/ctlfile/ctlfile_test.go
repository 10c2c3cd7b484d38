package ctlfile_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"golang.org/x/sys/unix"
)

const mib = 1 << 20

// issue 9, defect 12: a control write that reclaims (v1: a limit below
// usage; v2: memory.reclaim) runs in the writer's context for as long as
// reclaim takes, here waiting for dirty pages to be written back. The end
// of the caller's context interrupts it: the write returns the context's
// error soon after, with the reclaim unfinished. (On the v1 host the
// uncancelled write of 4 MiB took 527 ms and brought 50 MiB of dirty cache
// down to 3.9 MiB; cancelled at 20 ms it returned at 282 ms, usage
// unchanged.)
func TestControlWriteStopsWhenContextEnds(t *testing.T) {
	l := cgrouptest.Layout(t)
	const cancelAfter = 20 * time.Millisecond
	size := cgrouptest.DirtySize(t)
	c := cgrouptest.New(t, l, 0)
	dirtyFile := filepath.Join(cgrouptest.DiskDir(t), "dirty")
	cgrouptest.StartWriter(t, c, dirtyFile, size)
	// Write the dirty pages back before the next test, whose journal
	// fsyncs would otherwise wait for them.
	t.Cleanup(func() {
		if f, err := os.Open(dirtyFile); err == nil {
			_ = f.Sync()
			f.Close()
		}
	})
	file, value := filepath.Join(c.Dir, "memory.reclaim"), strconv.FormatInt(size, 10)
	if l.Memory.Version == layout.V1 {
		file, value = filepath.Join(c.Dir, "memory.limit_in_bytes"), strconv.Itoa(4*mib)
	}
	before := c.Usage(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(cancelAfter, cancel)
	start := time.Now()
	err := ctlfile.WriteCtx(ctx, file, value)
	took := time.Since(start)
	after := c.Usage(t)
	t.Logf("write %s to %s, cancelled after %v: returned after %v: %v; usage %.1f -> %.1f MiB",
		value, file, cancelAfter, took.Round(time.Microsecond), err, float64(before)/mib, float64(after)/mib)
	if err == nil {
		// The kernel checks for a signal between reclaim rounds
		// (mm/memcontrol.c, memory_reclaim: signal_pending); a round
		// that met the whole request ends the write without one. The
		// bound still holds: the write did not outlast the cancel by
		// more than a second.
		if took > cancelAfter+cgrouptest.VMSlack() {
			t.Errorf("the write finished %v after the cancel, want within %v", took-cancelAfter, cgrouptest.VMSlack())
		}
		t.Logf("the kernel met the request in one reclaim round (%v), before it looked for the signal: nothing to interrupt", took)
		return
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("write: %v, want context.Canceled", err)
	}
	if took < cancelAfter {
		t.Fatalf("returned after %v, before the cancel at %v", took, cancelAfter)
	}
	if after < before/2 {
		t.Errorf("usage %.1f -> %.1f MiB: the reclaim ran to its end", float64(before)/mib, float64(after)/mib)
	}
	if took > cancelAfter+time.Second {
		t.Errorf("returned %v after the cancel, want within 1 s", took-cancelAfter)
	}
}

func TestWriteControlRefusesFilesOutsideCgroupfs(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "memory.limit_in_bytes")
	if err := os.WriteFile(p, []byte("5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dirfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dirfd)
	for _, tt := range []struct {
		name  string
		write func() error
	}{
		{"Write", func() error { return ctlfile.Write(p, "1") }},
		{"WriteAt", func() error { return ctlfile.WriteAt(dirfd, filepath.Base(p), "1") }},
	} {
		if err := tt.write(); err == nil {
			t.Errorf("%s of %s on a disk filesystem: no error", tt.name, p)
		}
		if b, _ := os.ReadFile(p); string(b) != "5\n" {
			t.Errorf("%s changed the file to %q", tt.name, b)
		}
	}
}

// PreadRecord's one read is the whole file at every buffer size, on the
// real kernel: below the file's length (it grows), at exactly its length
// (a full read is repeated, since it may have been cut), and above it.
// The cgroup has no tasks, so its files do not change between reads.
func TestPreadRecordReadsTheWholeFile(t *testing.T) {
	l := cgrouptest.Layout(t)
	c := cgrouptest.New(t, l, 64*mib)
	limit := "memory.max"
	if l.Memory.Version == layout.V1 {
		limit = "memory.limit_in_bytes"
	}
	for _, name := range []string{limit, "memory.stat"} {
		p := filepath.Join(c.Dir, name)
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{0, 1, len(want) - 1, len(want), len(want) + 1, 8192} {
			t.Run(fmt.Sprintf("%s/buffer %d", name, size), func(t *testing.T) {
				fd, err := ctlfile.OpenRead(append([]byte(p), 0))
				if err != nil {
					t.Fatal(err)
				}
				defer unix.Close(fd)
				buf := make([]byte, size)
				got, err := ctlfile.PreadRecord(fd, &buf)
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != string(want) {
					t.Errorf("PreadRecord read %d bytes %q, want the file's %d bytes %q", len(got), got, len(want), want)
				}
			})
		}
	}
}

// ReadUint and ReadLimit read a file of one number, and say which file
// and what was wrong with it otherwise. A missing file is
// host.ErrVanished. (The files here are plain ones: the reads are the
// same on cgroupfs, which every real-kernel test reads through them.)
func TestReadNumberFiles(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		limit         bool
		want          uint64
		err           string // a part of the error; "" for none
	}{
		{name: "usage", content: "104857600\n", want: 100 << 20},
		{name: "no newline", content: "7", want: 7},
		{name: "limit max", content: "max\n", limit: true, want: memcg.NoLimit},
		{name: "v1 no limit", content: "9223372036854771712\n", limit: true, want: memcg.NoLimit},
		{name: "limit", content: "1048576\n", limit: true, want: 1 << 20},
		{name: "max is no number", content: "max\n", err: `value "max": not a decimal digit`},
		{name: "empty", content: "", err: "empty"},
		{name: "too long", content: strings.Repeat("1", 40) + "\n", err: "more than 31 bytes: want one number"},
		{name: "overflow", content: "18446744073709551616\n", err: "out of range for uint64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			read := ctlfile.ReadUint
			if tc.limit {
				read = ctlfile.ReadLimit
			}
			got, err := read(p)
			switch {
			case tc.err == "" && (err != nil || got != tc.want):
				t.Errorf("read %q = %d, %v; want %d", tc.content, got, err, tc.want)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), p)):
				t.Errorf("read %q = %d, %v; want an error naming %s and saying %q", tc.content, got, err, p, tc.err)
			}
		})
	}
	if _, err := ctlfile.ReadUint(filepath.Join(dir, "gone")); !errors.Is(err, host.ErrVanished) {
		t.Errorf("a missing file: %v, want host.ErrVanished", err)
	}
}

// Read returns a file whole without its trailing newline, whether it fits
// the buffer on the stack or not.
func TestReadReturnsTheWholeFile(t *testing.T) {
	dir := t.TempDir()
	line := func(n int) string { return strings.Repeat("x", n-1) + "\n" }
	for _, content := range []string{
		"", "0\n", "max", line(255), line(256), line(257),
		strings.Repeat(line(40), 100), // memory.stat's size: many lines
	} {
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ctlfile.Read(p)
		if want := strings.TrimSuffix(content, "\n"); err != nil || got != want {
			t.Errorf("Read of %d bytes = %d bytes, %v; want %d bytes", len(content), len(got), err, len(want))
		}
	}
	if _, err := ctlfile.Read(filepath.Join(dir, "gone")); !errors.Is(err, host.ErrVanished) {
		t.Errorf("a missing file: %v, want host.ErrVanished", err)
	}
}
