package act

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/format"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// Dirtied returns the bytes of page cache that the processes now in cg and
// its descendants have dirtied over their lives: the sum of their
// /proc/PID/io write_bytes, which the kernel counts when a page is dirtied
// (mm/page-writeback.c folio_account_dirtied -> task_io_account_write),
// not when it reaches the disk. Memory cgroups count no such thing
// themselves; pgpgin counts charge events, one per folio of any size.
//
// The sum falls when a process exits or leaves; callers use increases
// only. A process gone meanwhile is skipped.
func Dirtied(ctx context.Context, procRoot string, l layout.Layout, cg host.Cgroup) (uint64, error) {
	dir := l.Memory.Dir(cg)
	if dir == "" {
		return 0, fmt.Errorf("dirtied %s: outside the mounted memory hierarchy %s", cg, l.Memory.Mount)
	}
	pids, err := subtreeProcs(dir)
	if err != nil {
		return 0, fmt.Errorf("dirtied %s: %w", cg, err)
	}
	var sum uint64
	for _, pid := range pids {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		n, err := writeBytes(procRoot, pid)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNoSuchProcess) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("dirtied %s: %w", cg, err)
		}
		sum += n
	}
	return sum, nil
}

var errNoSuchProcess = errors.New("no such process")

// writeBytes reads write_bytes from /proc/PID/io (fs/proc/base.c do_io_accounting).
func writeBytes(procRoot string, pid int) (uint64, error) {
	path := procRoot + "/" + strconv.Itoa(pid) + "/io"
	b, err := os.ReadFile(path)
	if err != nil {
		// A process exiting between cgroup.procs and here reads as ESRCH.
		if errors.Is(err, unix.ESRCH) {
			return 0, errNoSuchProcess
		}
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	var io format.TaskIO
	if err := format.ParseTaskIO(b, &io); err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return io.WriteBytes, nil
}
