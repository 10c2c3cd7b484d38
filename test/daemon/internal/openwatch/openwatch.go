// Package openwatch reports every open(2) of a set of files, by any
// process, by fanotify (with the opener's PID) or inotify. A process may
// hold O_PATH descriptors of the files, and dup them around, without
// being seen; only a real open is, which for a device is what runs its
// driver's open. Which event tells the two apart depends on the kernel,
// so the caller picks the Mode after trying them (see Mode).
//
// Fanotify needs CAP_SYS_ADMIN.
package openwatch

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mode is the kind of event a Watch counts.
type Mode int

const (
	// Permission counts fanotify FAN_OPEN_PERM events, raised in
	// security_file_open, which an O_PATH open never reaches
	// (fs/open.c do_dentry_open returns before it). On Linux 6.18
	// fanotify reported no open at all of a device node or a FIFO
	// (regular files only), which the caller's check finds. Each event
	// is allowed at once: the watch observes, it does not deny. Needs
	// CONFIG_FANOTIFY_ACCESS_PERMISSIONS.
	Permission Mode = iota
	// Inotify counts IN_OPEN events, which carry no PID, and which
	// Linux raises for O_PATH opens too before 6.5 (commit "fsnotify:
	// Do not generate events for O_PATH file descriptors"). They are
	// queued, not waited for, and the kernel merges an event with an
	// identical one still unread: a count of them is a lower bound,
	// and zero is zero.
	Inotify
)

func (m Mode) String() string {
	if m == Permission {
		return "fanotify FAN_OPEN_PERM"
	}
	return "inotify IN_OPEN"
}

// An Open is one open of a watched file.
type Open struct {
	// File is the watched path that was opened.
	File string
	// PID is the opening process (its thread group), 0 if unknown
	// (inotify).
	PID int
	// Comm is its command name, when it could still be read.
	Comm string
}

// Watch reports opens of the files given to New.
type Watch struct {
	mode  Mode
	f     *os.File
	files map[[2]uint64]string // device and inode to path (fanotify)
	wds   map[int32]string     // watch descriptor to path (inotify)
	done  chan struct{}        // closed when the reader has returned

	mu    sync.Mutex // guards opens and err
	opens []Open
	err   error
}

// New starts watching paths for the events of mode.
func New(mode Mode, paths ...string) (*Watch, error) {
	if mode == Inotify {
		return newInotify(paths)
	}
	// The descriptor of each event is opened without blocking: the file
	// may be a FIFO.
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_CONTENT|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK,
		unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_LARGEFILE)
	if err != nil {
		return nil, fmt.Errorf("fanotify_init(FAN_CLASS_CONTENT): %w", err)
	}
	w := &Watch{mode: mode, f: os.NewFile(uintptr(fd), "fanotify"), files: map[[2]uint64]string{}, done: make(chan struct{})}
	for _, p := range paths {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			w.f.Close()
			return nil, fmt.Errorf("stat %s: %w", p, err)
		}
		w.files[[2]uint64{st.Dev, st.Ino}] = p
		if err := unix.FanotifyMark(fd, unix.FAN_MARK_ADD, unix.FAN_OPEN_PERM, unix.AT_FDCWD, p); err != nil {
			w.f.Close()
			return nil, fmt.Errorf("fanotify_mark(FAN_OPEN_PERM) %s: %w", p, err)
		}
	}
	go w.readFanotify()
	return w, nil
}

func newInotify(paths []string) (*Watch, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	w := &Watch{mode: Inotify, f: os.NewFile(uintptr(fd), "inotify"), wds: map[int32]string{}, done: make(chan struct{})}
	for _, p := range paths {
		wd, err := unix.InotifyAddWatch(fd, p, unix.IN_OPEN)
		if err != nil {
			w.f.Close()
			return nil, fmt.Errorf("inotify_add_watch(IN_OPEN) %s: %w", p, err)
		}
		w.wds[int32(wd)] = p
	}
	go w.readInotify()
	return w, nil
}

// readInotify records events until the watch is closed.
func (w *Watch) readInotify() {
	defer close(w.done)
	buf := make([]byte, 4096)
	const evLen = int(unsafe.Sizeof(unix.InotifyEvent{}))
	for {
		n, err := w.f.Read(buf)
		if errors.Is(err, os.ErrClosed) {
			return
		}
		if err != nil {
			w.fail(fmt.Errorf("read inotify events: %w", err))
			return
		}
		for off := 0; off+evLen <= n; {
			e := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			off += evLen + int(e.Len)
			if e.Mask&unix.IN_OPEN == 0 {
				continue // IN_IGNORED, IN_Q_OVERFLOW
			}
			w.mu.Lock()
			w.opens = append(w.opens, Open{File: w.wds[e.Wd]})
			w.mu.Unlock()
		}
	}
}

// readFanotify answers and records events until the watch is closed.
func (w *Watch) readFanotify() {
	defer close(w.done)
	buf := make([]byte, 4096)
	const metaLen = int(unsafe.Sizeof(unix.FanotifyEventMetadata{}))
	for {
		n, err := w.f.Read(buf)
		if errors.Is(err, os.ErrClosed) {
			return
		}
		if err != nil {
			w.fail(fmt.Errorf("read fanotify events: %w", err))
			return
		}
		for off := 0; off+metaLen <= n; {
			m := (*unix.FanotifyEventMetadata)(unsafe.Pointer(&buf[off]))
			if m.Event_len < uint32(metaLen) || off+int(m.Event_len) > n {
				w.fail(fmt.Errorf("fanotify event of %d bytes at %d of %d", m.Event_len, off, n))
				return
			}
			off += int(m.Event_len)
			if m.Fd < 0 {
				continue // queue overflow: cannot happen with permission events
			}
			w.record(int(m.Fd), int(m.Pid))
			resp := unix.FanotifyResponse{Fd: m.Fd, Response: unix.FAN_ALLOW}
			_, err := w.f.Write((*[unsafe.Sizeof(resp)]byte)(unsafe.Pointer(&resp))[:])
			unix.Close(int(m.Fd))
			if err != nil {
				w.fail(fmt.Errorf("answer fanotify event: %w", err))
				return
			}
		}
	}
}

func (w *Watch) record(fd, pid int) {
	o := Open{PID: pid, File: "?"}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil {
		if p, ok := w.files[[2]uint64{st.Dev, st.Ino}]; ok {
			o.File = p
		}
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); err == nil {
		o.Comm = strings.TrimSpace(string(b))
	}
	w.mu.Lock()
	w.opens = append(w.opens, o)
	w.mu.Unlock()
}

func (w *Watch) fail(err error) {
	w.mu.Lock()
	w.err = errors.Join(w.err, err)
	w.mu.Unlock()
}

// Mode is the events the watch counts.
func (w *Watch) Mode() Mode { return w.mode }

// Opens returns the opens seen so far, and whether the watch broke.
func (w *Watch) Opens() ([]Open, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Open(nil), w.opens...), w.err
}

// Close stops the watch. An open waiting for its answer is allowed.
func (w *Watch) Close() error {
	err := w.f.Close()
	<-w.done
	return err
}
