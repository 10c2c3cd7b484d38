package vm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// makeDisk creates a sparse raw disk image of size bytes with an empty ext4
// filesystem. The inode tables and journal are initialised here, on the host,
// so the guest's ext4lazyinit thread does not write to the throttled disk
// while tests measure it (fs/ext4/super.c: ext4_lazyinit_thread).
func makeDisk(ctx context.Context, mkfs, path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create disk: %w", err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return fmt.Errorf("size disk %s to %d bytes: %w", path, size, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create disk %s: %w", path, err)
	}
	cmd := exec.CommandContext(ctx, mkfs, "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", path)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4 %s: %w\n%s", path, err, out)
	}
	return nil
}
