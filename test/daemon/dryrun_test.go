package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/internal/sandbox"
)

// memcgd run --dry-run decides, counts and logs, and changes nothing: two
// cgroups far past their dirty limit and background threshold (one with
// every mirror, which the daemon would pace or freeze, one in the memory
// hierarchy only, for which it would make a freezer cgroup) keep their
// limits, are never frozen, get no memcgd.pace cpu cgroup nor freezer
// mirror, and keep their dirty pages (no write-out); the journal records
// nothing. Meanwhile memcgd stat shows the decisions counted (write-outs,
// paces or freezes), with dry_run, and the log says at start that nothing
// will be changed.
func TestDryRunChangesNothing(t *testing.T) {
	l := cgrouptest.Layout(t)
	// The pages must stay dirty unless memcgd writes them out: both
	// writers' together within half the kernel's background threshold
	// (cgrouptest.DirtySize), and a limit too large to shrink the memcg's
	// own dirty domain on v2 (mm/page-writeback.c mdtc_calc_avail), yet
	// one the daemon could lower on v1.
	const limit = 1 << 30
	written := cgrouptest.DirtySize(t)
	dirtyBytes, background := written/3, written/6 // written is far past both
	parent := cgrouptest.New(t, l, 0)
	w := parent.Child(t, "mirrored")
	setLimit(t, l, w, limit)
	bare := memoryOnlyCgroup(t, l, host.Cgroup(path.Join(string(parent.Path), "memory-only")), limit)
	if l.Memory.Version == layout.V1 && l.Freezer != nil {
		if _, err := os.Stat(l.Freezer.Dir(bare.Path)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("freezer cgroup at %s before the daemon: %v, want none", bare.Path, err)
		}
	}
	dir := diskDir(t)

	d := newDaemon(t, managedConfig(parent.Path, fmt.Sprintf(
		"dirty_background_bytes: %d, dirty_bytes: %d, writeback_first: true", background, dirtyBytes)), "--dry-run")
	d.start()
	if line, ok := d.waitLog(0, readyTimeout, "dry run: nothing will be changed", "pending=0"); !ok {
		t.Errorf("the daemon did not say at start that nothing will be changed")
	} else {
		t.Logf("log: %s", line)
	}

	// Watch every file the daemon would write, from before the writers
	// start until the daemon has stopped.
	files, absent := watchedFiles(t, l, w, bare)
	stopWatch := watchUnchanged(t, files, absent)

	// A writer that keeps its file open, as in the write-out test: the
	// pages stay dirty unless someone writes them out.
	var dirtyNow func() uint64
	for try := 1; ; try++ {
		cgrouptest.StartWriter(t, w, filepath.Join(dir, fmt.Sprintf("mirrored-%d", try)), written)
		startBareWriter(t, bare, filepath.Join(dir, fmt.Sprintf("bare-%d", try)), written, 4096)
		dirtyNow = func() uint64 { s := observe(t, l, w); return s.Dirty + s.Writeback }

		// The daemon counts what it would do.
		var s map[string]uint64
		if _, ok := poll(readyTimeout*slow(), 20*time.Millisecond, func() bool {
			s = d.stat(w.Path)
			return s["writeout_targeted"] > 0 && throttled(s) > 0
		}); !ok {
			t.Fatalf("memcgd stat %s: writeout_targeted %d, throttle_paces %d, throttle_pauses %d: want the dry run's decisions counted",
				w.Path, s["writeout_targeted"], s["throttle_paces"], s["throttle_pauses"])
		}
		// A second, with the daemon at work, for it to have written out
		// had it not run dry.
		time.Sleep(time.Second)
		dirty := dirtyNow()
		if dirty >= uint64(written)*3/4 {
			t.Logf("memcgd stat %s: writeout_targeted %d, throttle_paces %d, throttle_pauses %d; dirty+writeback still %d of %d MiB",
				w.Path, s["writeout_targeted"], s["throttle_paces"], s["throttle_pauses"], dirty/mib, written/mib)
			break
		}
		// Another process's sync(1) on a shared machine writes them out
		// too: try again with a new file, a few times.
		if try == 3 {
			t.Fatalf("dirty+writeback of %s fell to %d of %d MiB in a dry run (3 tries): something wrote it out", w.Path, dirty/mib, written/mib)
		}
		t.Logf("try %d: dirty+writeback fell to %d MiB (another process's sync?); again", try, dirty/mib)
	}
	out, _, err := d.client(nil, "stat", "--socket", d.Socket, "--json", string(w.Path))
	if err != nil || !strings.Contains(out, `"dry_run": true`) || !strings.Contains(out, `"managed": true`) {
		t.Errorf("memcgd stat --json %s: %v\n%s\nwant managed and dry_run true", w.Path, err, out)
	}

	d.stop()
	for _, change := range stopWatch() {
		t.Error(change)
	}
	if p := journalPending(t, d.Journal); len(p) > 0 {
		t.Errorf("journal holds changes of %v after a dry run, want none", p)
	}
	if b, err := os.ReadFile(d.Journal); err == nil && strings.Contains(string(b), `"path"`) {
		t.Errorf("the journal recorded changes in a dry run:\n%s", b)
	}
	for _, top := range []*layout.Hierarchy{l.CPU, l.Freezer} {
		if top == nil {
			continue
		}
		if dir := top.Dir(parent.Path); dir != "" {
			if made := dirsNamed(t, dir, journal.PaceGroupName); len(made) > 0 {
				t.Errorf("pace cgroups made in a dry run: %v", made)
			}
		}
	}
	if l.Memory.Version == layout.V1 && l.Freezer != nil {
		if _, err := os.Stat(l.Freezer.Dir(bare.Path)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("freezer cgroup at %s after a dry run: %v, want none made", bare.Path, err)
		}
	}
	if _, ok := d.waitLog(0, 0, "level=INFO", "dry_run=true"); !ok {
		t.Errorf("no info line of the daemon's decisions carries dry_run=true")
	}
}

// watchedFile is a control file the daemon would write, and what it held
// before.
type watchedFile struct {
	path, was string
}

// watchedFiles are the files a real run would write for c and bare (their
// limits, and c's freezers and CPU bandwidth), and the cgroups it would
// make (c's pace group, bare's freezer mirror).
func watchedFiles(t *testing.T, l layout.Layout, c *cgrouptest.Cgroup, bare *sandbox.Cgroup) ([]watchedFile, []string) {
	t.Helper()
	var absent []string
	if l.Memory.Version == layout.V1 && l.Freezer != nil {
		absent = append(absent, l.Freezer.Dir(bare.Path))
	}
	paths := []string{filepath.Join(c.Dir, limitFile(l)), filepath.Join(bare.Dir, limitFile(l))}
	if dir, ok := l.UnifiedDir(c.Path); ok {
		paths = append(paths, filepath.Join(dir, "cgroup.freeze"))
		if l.Memory.Version == layout.V2 {
			if _, err := os.Stat(filepath.Join(dir, "cpu.max")); err == nil {
				paths = append(paths, filepath.Join(dir, "cpu.max"))
			}
			absent = append(absent, filepath.Join(dir, journal.PaceGroupName))
		}
	}
	if dir, ok := l.FreezerDir(c.Path); ok {
		paths = append(paths, filepath.Join(dir, "freezer.state"))
	}
	if dir := cpuDir(l, c); dir != "" {
		if _, err := os.Stat(dir); err == nil {
			paths = append(paths, filepath.Join(dir, "cpu.cfs_quota_us"))
			absent = append(absent, filepath.Join(dir, journal.PaceGroupName))
		}
	}
	var out []watchedFile
	for _, p := range paths {
		out = append(out, watchedFile{p, readFile(t, p)})
	}
	return out, absent
}

// watchUnchanged reads files, and looks for the directories absent, every
// 2 ms until the returned function is called, which returns every change
// seen.
func watchUnchanged(t *testing.T, files []watchedFile, absent []string) func() []string {
	t.Helper()
	var (
		mu      sync.Mutex
		changes []string
		done    = make(chan struct{})
		stopped = make(chan struct{})
	)
	t.Logf("watching %d files: %v; and that none of %v appears", len(files), files, absent)
	seen := map[string]bool{}
	// note records the first change of each path.
	note := func(p, change string) {
		mu.Lock()
		defer mu.Unlock()
		if !seen[p] {
			seen[p] = true
			changes = append(changes, change)
		}
	}
	go func() {
		defer close(stopped)
		for {
			for _, f := range files {
				b, err := os.ReadFile(f.path)
				if now := strings.TrimSpace(string(b)); err == nil && now != f.was {
					note(f.path, fmt.Sprintf("%s: %q, was %q: a dry run changed it", f.path, now, f.was))
				}
			}
			for _, d := range absent {
				if _, err := os.Stat(d); err == nil {
					note(d, d+": made in a dry run")
				}
			}
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	stop := func() []string {
		once.Do(func() { close(done); <-stopped })
		mu.Lock()
		defer mu.Unlock()
		out := changes
		changes = nil
		return out
	}
	// A test that ends early still reports what was seen.
	t.Cleanup(func() {
		for _, c := range stop() {
			t.Error(c)
		}
	})
	return stop
}

// memoryOnlyCgroup creates cg in the memory hierarchy only, limited to
// limit, as systemd or YARN do on a legacy host; cleanup kills its tasks
// and removes it.
func memoryOnlyCgroup(t *testing.T, l layout.Layout, cg host.Cgroup, limit uint64) *sandbox.Cgroup {
	t.Helper()
	c, err := sandbox.Create(l, cg, sandbox.Options{Limit: limit})
	if c != nil {
		t.Cleanup(func() {
			if err := c.Remove(); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startBareWriter starts a writer of size bytes, in writes of block, to
// file in the memory cgroup c only, which then sleeps with the file open:
// tasks that a real run would move to a freezer cgroup it makes. It
// returns once the write is done; the writer is killed at cleanup.
func startBareWriter(t *testing.T, c *sandbox.Cgroup, file string, size, block int64) *exec.Cmd {
	t.Helper()
	script := `echo $$ > "$0/cgroup.procs" || exit 126; exec 5>"$1" || exit 1; dd if=/dev/zero bs="$3" count="$2" >&5 2>/dev/null || exit 1; echo done; exec sleep 3600`
	cmd := exec.Command("sh", "-c", script, c.Dir, file, strconv.FormatInt(size/block, 10), strconv.FormatInt(block, 10))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 5)
	if n, err := out.Read(buf); err != nil || string(buf[:n]) != "done\n" {
		t.Fatalf("writer in %s: %q, %v", c.Path, buf[:n], err)
	}
	return cmd
}

// dirsNamed lists the directories called name beneath root.
func dirsNamed(t *testing.T, root, name string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		if e.IsDir() && e.Name() == name {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
