package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/layout"
)

// joinedEnv marks a memcgd that re-executed itself after joining PID 1's
// cgroup namespace; its value is the namespace it left. A memcgd started
// with it does not join again: if its paths are still not the host's, it
// refuses.
const joinedEnv = "MEMCGD_LEFT_CGROUPNS"

// hostLayout discovers the cgroup mounts and makes sure that the cgroup
// paths the process reads from them and from procRoot are the host's.
//
// In a cgroup namespace of its own (a container's, on cgroup v2) the kernel
// shows every cgroup path relative to the namespace's root, and memcgd
// would take its own cgroup for the root and manage nothing it names
// right. So when layout.PrivateNamespace finds signs of one, memcgd joins
// PID 1's cgroup namespace, the host's when /proc is the host's (hostPID),
// and executes itself again there; it does not return then. When it cannot
// join, or its paths are still not the host's once joined, it refuses: the
// error names what showed the namespace, why the join failed, and the fix.
//
// Why a new execution: setns(2) moves the calling thread alone
// (kernel/nsproxy.c, setns: commit_nsset switches current's nsproxy), and
// a Go program has several threads before main runs; each reads cgroup
// paths as its own namespace shows them, and a thread inherits its
// creator's. syscall.AllThreadsSyscall would reach every thread, but only
// in a binary without cgo, which a default build on a machine with a C
// compiler is not (package net links it). An execve from the thread that
// joined keeps that thread alone (fs/exec.c, de_thread) and its
// namespaces, so the new image starts, and starts every thread, in the
// host's namespace, under the same PID.
func hostLayout(procRoot string, log *slog.Logger) (layout.Layout, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	l, err := layout.Discover(procRoot)
	if err != nil {
		return layout.Layout{}, err
	}
	signs, err := layout.PrivateNamespace(procRoot, l)
	if err != nil {
		return layout.Layout{}, err
	}
	left, joined := os.LookupEnv(joinedEnv)
	if joined {
		os.Unsetenv(joinedEnv)
	}
	if len(signs) == 0 {
		if joined {
			ns, _ := layout.CgroupNamespace(procRoot, "self")
			log.Info("joined PID 1's cgroup namespace: cgroup paths are the host's", "left", left, "joined", ns)
		}
		return l, nil
	}
	if joined {
		return layout.Layout{}, &privateNamespaceError{signs: signs,
			join: fmt.Errorf("memcgd joined PID 1's cgroup namespace and still sees them: PID 1 is not the host's init, so /proc is not the host's")}
	}
	log.Info("memcgd is in a cgroup namespace of its own: joining PID 1's and executing again", "signs", strings.Join(signs, "; "))
	err = execInNamespace(filepath.Join(procRoot, "1", "ns", "cgroup"), procRoot)
	return layout.Layout{}, &privateNamespaceError{signs: signs, join: err}
}

// privateNamespaceError is the refusal to work in a cgroup namespace of
// memcgd's own.
type privateNamespaceError struct {
	signs []string // what showed the namespace (layout.PrivateNamespace)
	join  error    // why joining the host's failed
}

func (e *privateNamespaceError) Error() string {
	return fmt.Sprintf("memcgd is in a cgroup namespace of its own, so the cgroup paths it reads are not the host's (%s), "+
		"and it cannot join the host's: %v. "+
		"Run it in the host's cgroup namespace: in Kubernetes, give its pod hostPID: true and the capability SYS_ADMIN, "+
		"and memcgd joins PID 1's at start; with docker or podman, run it with --cgroupns=host",
		strings.Join(e.signs, "; "), e.join)
}

// execInNamespace joins the cgroup namespace at nsPath and executes the
// running binary again with the same arguments. It returns only if it
// fails; then the calling goroutine stays locked to its thread, which may
// be in the other namespace, and the caller must exit.
func execInNamespace(nsPath, procRoot string) error {
	own, err := layout.CgroupNamespace(procRoot, "self")
	if err != nil {
		return err
	}
	pid1, err := layout.CgroupNamespace(procRoot, "1")
	if errors.Is(err, unix.EACCES) {
		return fmt.Errorf("PID 1's %w (it needs ptrace read access to PID 1: CAP_SYS_PTRACE, and no security profile that forbids it)", err)
	}
	if err != nil {
		return fmt.Errorf("PID 1's %w", err)
	}
	if own == pid1 {
		return fmt.Errorf("PID 1 is in the same cgroup namespace, %s: /proc is not the host's", own)
	}
	f, err := os.Open(nsPath)
	if err != nil {
		return err
	}
	defer f.Close()
	runtime.LockOSThread()
	// Needs CAP_SYS_ADMIN in memcgd's user namespace and in the one that
	// owns the target (kernel/cgroup/namespace.c, cgroupns_install).
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWCGROUP); err != nil {
		runtime.UnlockOSThread()
		if errors.Is(err, unix.EPERM) {
			return fmt.Errorf("setns %s: %w (it needs CAP_SYS_ADMIN)", nsPath, err)
		}
		return fmt.Errorf("setns %s: %w", nsPath, err)
	}
	// A reload asked for now is lost rather than fatal: a SIGHUP ignored
	// stays ignored across execve until the new image asks for it
	// (os/signal), where the default action would end the daemon.
	signal.Ignore(syscall.SIGHUP)
	env := append(os.Environ(), joinedEnv+"="+own)
	err = syscall.Exec("/proc/self/exe", os.Args, env)
	return fmt.Errorf("execute /proc/self/exe in PID 1's cgroup namespace: %w", err)
}
