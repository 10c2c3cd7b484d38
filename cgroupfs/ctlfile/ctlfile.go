// Package ctlfile reads and writes cgroupfs control files with raw system
// calls, and names what a control file belongs to: its cgroup's inode
// number and the kernel's boot.
//
// Invariants: a write goes only to a file on cgroupfs (fstatfs is checked
// on the open descriptor), in one write(2) that the caller's context can
// interrupt; a missing cgroup is host.ErrVanished, whichever call found it.
// Nothing here keeps state between calls.
package ctlfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"github.com/memcgd/memcgd/cgroupfs/format"
	"github.com/memcgd/memcgd/host"
	"golang.org/x/sys/unix"
)

// Read reads a cgroupfs control file and returns its content
// without the trailing newline. A missing cgroup is host.ErrVanished.
//
// It reads with raw system calls, as it writes: os.ReadFile also fstats
// the file and, kernfs files being pollable, registers it with the
// runtime's poller and unregisters it at close, seven calls for one read
// where four do. The v1 squeeze reads several per step, at hundreds of
// steps a second for a fast writer.
//
// Most control files are a line: it reads into a buffer on the stack, and
// only a file longer than that (memory.stat, 1-3 KiB) again from the start
// into one on the heap.
func Read(p string) (string, error) {
	fd, err := OpenRead(append([]byte(p), 0))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, Vanished(err))
	}
	defer unix.Close(fd)
	var small [256]byte
	for n := 0; n < len(small); {
		m, err := unix.Pread(fd, small[n:], int64(n))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return "", fmt.Errorf("read %s: %w", p, Vanished(err))
		case m == 0:
			return strings.TrimSuffix(string(small[:n]), "\n"), nil
		}
		n += m
	}
	buf := make([]byte, 4*len(small))
	out, err := PreadAll(fd, &buf)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, Vanished(err))
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

// ReadInto reads a cgroupfs control file whole into *buf, growing it as
// needed, and returns its content, trailing newline included: Read for a
// caller that parses the bytes and reads again into the same buffer. A
// missing cgroup is host.ErrVanished.
func ReadInto(p string, buf *[]byte) ([]byte, error) {
	fd, err := OpenRead(append([]byte(p), 0))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, Vanished(err))
	}
	defer unix.Close(fd)
	out, err := PreadAll(fd, buf)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, Vanished(err))
	}
	return out, nil
}

// PreadAll reads fd from offset 0 into *buf, growing it as needed, and
// returns what it read. On a kernfs control file a read at offset 0
// regenerates the contents (fs/seq_file.c, seq_read_iter), so a file kept
// open reads as fresh as a new one.
func PreadAll(fd int, buf *[]byte) ([]byte, error) {
	n := 0
	for {
		if n == len(*buf) {
			*buf = append(*buf, make([]byte, len(*buf))...)
		}
		m, err := unix.Pread(fd, (*buf)[n:], int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			return (*buf)[:n], nil
		}
		n += m
	}
}

// PreadRecord reads a control file that shows one record, as every
// memory.* file does, into *buf in one pread(2) at offset 0, and returns
// what it read. A read shorter than *buf is the whole file: kernfs shows a
// cgroup file without a seq_start as single_open does (fs/kernfs/file.c,
// kernfs_seq_start; kernel/cgroup/cgroup.c, cgroup_kf_single_ops), and
// seq_read_iter (fs/seq_file.c) grows its buffer until that one record
// fits, then copies out as much as the read asks. A read that fills *buf
// is repeated from offset 0 into a buffer twice the size, so the contents
// are always one generation. This spares PreadAll's second read, which
// only finds the end: half the calls for a file kept open. Files of many
// records (cgroup.procs, tasks) stop a read at a page; read them with
// PreadAll.
func PreadRecord(fd int, buf *[]byte) ([]byte, error) {
	for {
		m, err := unix.Pread(fd, *buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m < len(*buf) {
			return (*buf)[:m], nil
		}
		*buf = make([]byte, max(2*len(*buf), 512))
	}
}

// ReadUint reads a single-number control file such as memory.current.
func ReadUint(p string) (uint64, error) {
	return readNumber(p, false)
}

// ReadLimit reads a limit file: a number of bytes or "max".
func ReadLimit(p string) (uint64, error) {
	return readNumber(p, true)
}

// readNumber reads a control file of one number, at most 31 bytes long: a
// limit ("max" allowed) or not. The buffer stays on the stack (the
// parsers are called directly, not through a func value, which would move
// it to the heap): a squeeze reads usage several times a step.
func readNumber(p string, limit bool) (uint64, error) {
	fd, err := OpenRead(append([]byte(p), 0))
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", p, Vanished(err))
	}
	defer unix.Close(fd)
	var buf [32]byte
	n, err := unix.Pread(fd, buf[:], 0)
	for err == unix.EINTR {
		n, err = unix.Pread(fd, buf[:], 0)
	}
	switch {
	case err != nil:
		return 0, fmt.Errorf("read %s: %w", p, Vanished(err))
	case n == len(buf):
		return 0, fmt.Errorf("read %s: more than %d bytes: want one number", p, len(buf)-1)
	}
	var v uint64
	if limit {
		v, err = format.ParseLimit(buf[:n])
	} else {
		v, err = format.ParseUint(buf[:n])
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", p, err)
	}
	return v, nil
}

// Write is WriteCtx that cannot be cancelled.
func Write(p, value string) error {
	return WriteCtx(context.Background(), p, value)
}

// WriteCtx writes value to a cgroupfs control file in one write(2),
// after checking with fstatfs that the open file is on cgroupfs (v1 or
// v2), so that no path, however it was made, gets memcgd to write
// elsewhere. A missing cgroup is host.ErrVanished; the kernel's own errors
// (EBUSY, EAGAIN, EINVAL) are wrapped for errors.Is.
//
// It uses open(2) and write(2) directly, not os.File: kernfs files are
// pollable, so os.File registers them with the runtime poller and turns an
// EAGAIN from the kernel (memory.reclaim that found nothing to reclaim,
// mm/memcontrol.c memory_reclaim) into "wait until writable", which never
// comes (issue 9, defect 12).
//
// A write to memory.reclaim or memory.limit_in_bytes runs reclaim in the
// writer's context and stops only when done or when a signal is pending
// (mm/memcontrol.c memory_reclaim and mm/memcontrol-v1.c
// mem_cgroup_resize_max return -EINTR on signal_pending). So when ctx ends
// during the write, the writing thread is sent SIGURG, which the Go runtime
// expects and ignores (it is its own preemption signal): the write returns
// EINTR and WriteCtx returns ctx's error. A cancellation that lands
// just before the write(2) starts is noticed only after it returns, which
// the callers bound by writing at most act.ReclaimChunk at a time.
func WriteCtx(ctx context.Context, p, value string) error {
	return writeAt(ctx, unix.AT_FDCWD, p, value)
}

// WriteAt is Write of the control file name in the cgroup directory that
// dirfd holds (an O_PATH descriptor): the write goes to that cgroup, or
// fails with host.ErrVanished once it is removed, even if another cgroup
// has been made under its name since.
func WriteAt(dirfd int, name, value string) error {
	return writeAt(context.Background(), dirfd, name, value)
}

// writeAt is WriteCtx of p relative to the directory dirfd (AT_FDCWD: the
// working directory, for an absolute p none).
func writeAt(ctx context.Context, dirfd int, p, value string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	fd, err := openControl(dirfd, p)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := writeInterruptible(ctx, fd, []byte(value)); err != nil {
		return fmt.Errorf("write %q to %s: %w", value, p, Vanished(err))
	}
	return nil
}

// openControl opens p, relative to the directory dirfd, for writing, not
// following a symbolic link, and checks that it is on cgroupfs.
func openControl(dirfd int, p string) (int, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Openat(dirfd, p, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return -1, fmt.Errorf("write %s: %w", p, Vanished(&os.PathError{Op: "open", Path: p, Err: err}))
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("write %s: statfs: %w", p, err)
	}
	if st.Type != unix.CGROUP_SUPER_MAGIC && st.Type != unix.CGROUP2_SUPER_MAGIC {
		unix.Close(fd)
		return -1, fmt.Errorf("write %s: not on cgroupfs (filesystem magic %#x); refusing to write", p, st.Type)
	}
	return fd, nil
}

// writeInterruptible writes b to fd in one write(2), retrying EINTR while
// ctx lasts; see WriteCtx for how ctx interrupts it.
func writeInterruptible(ctx context.Context, fd int, b []byte) error {
	if ctx.Done() != nil { // a context that can end: Write's cannot
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		pid, tid := unix.Getpid(), unix.Gettid()
		stop := context.AfterFunc(ctx, func() { _ = unix.Tgkill(pid, tid, unix.SIGURG) })
		defer stop()
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := unix.Write(fd, b)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return err
		case n != len(b):
			return fmt.Errorf("short write: %d of %d bytes", n, len(b))
		}
		return nil
	}
}

// Ino returns the inode number of the cgroup directory dir: on
// cgroup v2 the cgroup id (kernel/cgroup/cgroup.c cgroup_id is the kernfs
// node id, which is the inode number, fs/kernfs/inode.c kernfs_init_inode),
// on v1 likewise the kernfs node id. Node ids are allocated cyclically
// (fs/kernfs/dir.c kernfs_new_node, idr_alloc_cyclic, with a generation in
// the upper 32 bits on 64-bit hosts), so a cgroup removed and created again
// under the same name gets a different one.
func Ino(dir string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", dir, Vanished(err))
	}
	return st.Ino, nil
}

// FileIno is Ino of the directory holding control file p.
func FileIno(p string) (uint64, error) { return Ino(filepath.Dir(p)) }

// bootIDFile names this boot of the kernel: a random UUID made at boot
// (drivers/char/random.c, proc_do_uuid for boot_id).
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// BootID returns the boot id.
func BootID() (string, error) {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("read boot id: %s is empty", bootIDFile)
	}
	return id, nil
}

// Vanished wraps err with host.ErrVanished when it says the cgroup is gone:
// ENOENT opening a file of a removed directory, ENODEV using a file whose
// cgroup was removed while it was open (fs/kernfs/file.c).
func Vanished(err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("%w: %w", host.ErrVanished, err)
	}
	return err
}

// IsVanished reports an error from a cgroup file or directory that was
// removed: ENOENT once it is gone, ENODEV from a file opened before the
// removal (fs/kernfs/file.c: kernfs_get_active fails on a removed node).
func IsVanished(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENODEV)
}

// PageSize is the unit in which the kernel keeps memory limits
// (mm/page_counter.c): a byte limit is rounded down to it.
const PageSize = 4096

// OpenRead opens the NUL-terminated path for reading with openat(2),
// called directly because every path-taking wrapper copies the path to a
// new C string.
func OpenRead(path []byte) (int, error) {
	return OpenReadAt(unix.AT_FDCWD, path)
}

// OpenReadAt is OpenRead of a path relative to the directory dirfd.
func OpenReadAt(dirfd int, path []byte) (int, error) {
	return openAt(dirfd, path, unix.O_RDONLY|unix.O_CLOEXEC)
}

// OpenDir opens the NUL-terminated path of a directory as a handle
// (O_PATH) for OpenReadAt: it opens no file of kernfs, only walks the path.
func OpenDir(path []byte) (int, error) {
	return openAt(unix.AT_FDCWD, path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)
}

func openAt(dirfd int, path []byte, flags int) (int, error) {
	for {
		fd, _, errno := syscall.Syscall6(syscall.SYS_OPENAT, uintptr(dirfd),
			uintptr(unsafe.Pointer(&path[0])), uintptr(flags), 0, 0, 0)
		switch errno {
		case 0:
			return int(fd), nil
		case syscall.EINTR:
			continue
		}
		return -1, errno
	}
}
