package cgrouptest_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// readProcCgroup returns the cgroup of pid in the hierarchy whose
// /proc/PID/cgroup line names controller, or the unified one for "".
func procCgroup(t *testing.T, pid int, controller string) host.Cgroup {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if controller == "" && f[0] == "0" || controller != "" && slices.Contains(strings.Split(f[1], ","), controller) {
			return host.Cgroup(f[2])
		}
	}
	t.Fatalf("/proc/%d/cgroup has no line for %q:\n%s", pid, controller, b)
	return ""
}

func TestNewStartsTasksInsideAndCleansUp(t *testing.T) {
	l := cgrouptest.Layout(t)
	var dirs []string
	t.Run("inside", func(t *testing.T) {
		c := cgrouptest.New(t, l, 64<<20)
		child := c.Child(t, "leaf")
		dirs = append(dirs, c.Dir, child.Dir)

		limitFile := "memory.max"
		if l.Memory.Version == layout.V1 {
			limitFile = "memory.limit_in_bytes"
		}
		b, err := os.ReadFile(filepath.Join(c.Dir, limitFile))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != strconv.Itoa(64<<20) {
			t.Errorf("%s = %s, want %d", limitFile, got, 64<<20)
		}

		cmd := child.Start(t, "sleep", "60")
		memCtl := "memory"
		if l.Memory.Version == layout.V2 {
			memCtl = ""
		}
		if got := procCgroup(t, cmd.Process.Pid, memCtl); got != child.Path {
			t.Errorf("started task in memory cgroup %s, want %s", got, child.Path)
		}
		if l.Memory.Version == layout.V1 {
			if d, ok := l.UnifiedDir(child.Path); ok {
				dirs = append(dirs, d)
				if got := procCgroup(t, cmd.Process.Pid, ""); got != child.Path {
					t.Errorf("started task in unified cgroup %s, want %s", got, child.Path)
				}
			} else if l.Unified != nil {
				t.Errorf("no unified mirror of %s", child.Path)
			}
			if d, ok := l.FreezerDir(child.Path); ok {
				dirs = append(dirs, d)
				if got := procCgroup(t, cmd.Process.Pid, "freezer"); got != child.Path {
					t.Errorf("started task in freezer cgroup %s, want %s", got, child.Path)
				}
			} else if l.Freezer != nil {
				t.Errorf("no freezer mirror of %s", child.Path)
			}
		}
	})
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("after cleanup, %s: %v, want it removed", d, err)
		}
	}
}

// statKeys reads the named keys of a cgroup's memory.stat.
func statKeys(t *testing.T, dir string, keys ...string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && slices.Contains(keys, k) {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("memory.stat %q: %v", line, err)
			}
			got[k] = n
		}
	}
	return got
}

// dirtyKeys are memory.stat's hierarchical dirty and writeback keys.
func dirtyKeys(l layout.Layout) (dirty, writeback string) {
	if l.Memory.Version == layout.V1 {
		return "total_dirty", "total_writeback"
	}
	return "file_dirty", "file_writeback"
}

func TestDirtyFileLeavesDirtyPagesCharged(t *testing.T) {
	l := cgrouptest.Layout(t)
	c := cgrouptest.New(t, l, 0)
	const size = 16 << 20
	cgrouptest.DirtyFile(t, c, filepath.Join(t.TempDir(), "dirty"), size)

	// Right after the writer exits its pages are dirty, or under writeback
	// if the flusher has started on them; nothing writes them back and
	// cleans them within the test's few milliseconds unless the machine
	// is past its global background threshold (or on v2 the cgroup past
	// its own, which without a limit is about the machine's). Half the
	// size leaves room for that and for per-CPU counter batching (a few
	// hundred KiB).
	dk, wk := dirtyKeys(l)
	s := statKeys(t, c.Dir, dk, wk)
	if got := s[dk] + s[wk]; got < size/2 {
		t.Errorf("%s + %s = %d bytes after writing %d, want at least %d", dk, wk, got, size, size/2)
	}
}

func TestStartWriterHoldsFileOpenForWriting(t *testing.T) {
	l := cgrouptest.Layout(t)
	c := cgrouptest.New(t, l, 0)
	file := filepath.Join(t.TempDir(), "held")
	const size = 1 << 20
	cmd := cgrouptest.StartWriter(t, c, file, size)

	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != size {
		t.Errorf("file size %d after StartWriter returned, want %d", fi.Size(), size)
	}
	fdDir := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/fd"
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		t.Fatal(err)
	}
	writable := false
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(fdDir, e.Name()))
		if err != nil || target != file {
			continue
		}
		info, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/fdinfo/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
				if err != nil {
					t.Fatalf("fdinfo flags %q: %v", v, err)
				}
				// O_ACCMODE is 3; O_WRONLY is 1, O_RDWR 2.
				writable = writable || flags&3 != 0
			}
		}
	}
	if !writable {
		t.Errorf("writer %d holds no writable fd on %s", cmd.Process.Pid, file)
	}
}
