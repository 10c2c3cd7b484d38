// Package atomicfile replaces a file's contents so that a crash leaves the
// old contents or the new, never a torn mix: the daemon's state files (the
// undo journal, the runtime overrides) must survive power loss intact.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write writes b to name with mode perm through a temporary file in the
// same directory: written, synced, renamed over name, and the directory
// synced so that the rename itself is durable.
func Write(name string, b []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(name)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return fmt.Errorf("replace %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(perm); err != nil {
		return fmt.Errorf("replace %s: %w", name, err)
	}
	if _, err := tmp.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("replace %s: %w", name, err)
	}
	return SyncDir(dir)
}

// SyncDir makes the entries of dir (a create, a rename) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
