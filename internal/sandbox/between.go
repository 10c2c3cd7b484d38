package sandbox

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// On a hybrid host a cgroup is mirrored at the same path in the unified
// and freezer hierarchies, where the calling process usually sits higher
// up (at the root): the directories in between, such as
// /process_api/<id>, must be created for the mirror and removed after.
// Processes run at once (go test runs packages in parallel; an experiment
// may run beside them) and share them, so whoever is last removes them. A
// lock file serialises creation and removal, and a marker file per
// directory records that this package created it: a directory without a
// marker, which the host's own manager made, is never removed.

// betweenLock and betweenMarks live in the temporary directory, shared by
// all processes of the machine. Their names predate this package (they
// were cgrouptest's) and stay, so that binaries built before and after
// follow one protocol.
const (
	betweenLock  = "memcgd-cgrouptest.lock"
	betweenMarks = "memcgd-cgrouptest-dirs"
)

// withBetweenLock runs f holding the machine-wide lock.
func withBetweenLock(f func() error) error {
	p := filepath.Join(os.TempDir(), betweenLock)
	lock, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("lock %s: %w", p, err)
	}
	defer lock.Close() // closing releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", p, err)
	}
	return f()
}

func markerOf(dir string) string {
	return filepath.Join(os.TempDir(), betweenMarks, hex.EncodeToString([]byte(dir)))
}

// MkdirMirror creates dir and the missing directories between top, which
// exists, and dir, marking those it creates, and returns the directories
// between, outermost first. Create uses it for the unified and freezer
// mirrors; a caller that mirrors a cgroup in another v1 hierarchy (an
// experiment's cpu cgroups) uses it too, removes dir itself and then hands
// the directories between to RemoveBetween.
func MkdirMirror(top, dir string) ([]string, error) {
	rel, err := filepath.Rel(top, dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("mkdir %s: not beneath %s", dir, top)
	}
	elems := strings.Split(rel, string(filepath.Separator))
	var between []string
	err = withBetweenLock(func() error {
		if err := os.MkdirAll(filepath.Join(os.TempDir(), betweenMarks), 0o700); err != nil {
			return err
		}
		cur := top
		for _, elem := range elems[:len(elems)-1] {
			cur = filepath.Join(cur, elem)
			err := os.Mkdir(cur, 0o755)
			if errors.Is(err, os.ErrExist) {
				between = append(between, cur)
				continue
			}
			if err != nil {
				return err
			}
			between = append(between, cur)
			if err := os.WriteFile(markerOf(cur), []byte(cur+"\n"), 0o600); err != nil {
				return err
			}
		}
		return os.Mkdir(dir, 0o755)
	})
	return between, err
}

// RemoveBetween removes, deepest first, the directories of between that
// this package created and nothing uses any more.
func RemoveBetween(between []string) error {
	return withBetweenLock(func() error {
		for i := len(between) - 1; i >= 0; i-- {
			d := between[i]
			if _, err := os.Stat(markerOf(d)); err != nil {
				continue // not ours
			}
			err := os.Remove(d)
			// A cgroup just removed beneath goes offline asynchronously
			// (kernel/cgroup/cgroup.c, css_killed_work_fn), and until then
			// its parent's rmdir fails with EBUSY though no directory is
			// left beneath it; on a slow (emulated) machine that can take
			// a while.
			deadline := time.Now().Add(Settle)
			for errors.Is(err, syscall.EBUSY) && time.Now().Before(deadline) && !hasSubdirs(d) {
				time.Sleep(10 * time.Millisecond)
				err = os.Remove(d)
			}
			if errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.ENOTEMPTY) {
				return nil // another process's cgroup is beneath; it removes this
			}
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			if err := os.Remove(markerOf(d)); err != nil {
				return err
			}
		}
		return nil
	})
}

// hasSubdirs reports whether a cgroup directory has child cgroups.
func hasSubdirs(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.IsDir() {
			return true
		}
	}
	return false
}
