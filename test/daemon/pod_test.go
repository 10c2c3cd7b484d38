package daemon

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The test binary, started with one of these as its first argument, lays
// out namespaces as a Kubernetes node and a pod on it see them, with no
// tool but itself (the test VM's busybox has no unshare --cgroup):
//
//	test.bin nodeHelper [-join DIR]... [-pid] -- POD-ARGS...
//	test.bin podHelper [-proc] [-remount MOUNT:TYPE:OPTIONS -host-at DIR] [-drop-sys-admin] -- CMD ARGS...
//
// nodeHelper joins the cgroup directories DIR (so that they are the root
// of the pod's cgroup namespace), starts the pod (the test binary again, as
// podHelper) in a cgroup and mount namespace of its own, and a PID
// namespace of its own with -pid, forwards SIGTERM, SIGHUP and SIGINT to it
// and exits with its status. Started as PID 1 of a PID namespace, it stands
// for the node's init, in the node's cgroup namespace, and mounts that
// namespace's /proc, which the pod then sees as the host's (hostPID).
//
// podHelper makes its mounts private, mounts /proc with -proc (the pod's
// own PID namespace), and with -remount does what a container runtime and
// a hostPath volume do: the node's cgroup mount at MOUNT goes to
// DIR/MOUNT, and a fresh one of TYPE with OPTIONS, rooted at the pod's
// cgroup namespace, takes its place. With -drop-sys-admin it drops
// CAP_SYS_ADMIN from what CMD may hold. Then it executes CMD.
const (
	nodeHelper = "memcgd-test-node"
	podHelper  = "memcgd-test-pod"
)

// runNamespaceHelper runs the helper named by mode and returns its exit
// status: the pod's for nodeHelper, 125 when it could not set up.
func runNamespaceHelper(mode string, args []string) int {
	var err error
	if mode == nodeHelper {
		var status int
		status, err = runNode(args)
		if err == nil {
			return status
		}
	} else {
		err = runPod(args) // returns only on failure
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", mode, err)
	return 125
}

func runNode(args []string) (int, error) {
	fl := flag.NewFlagSet(nodeHelper, flag.ContinueOnError)
	var join []string
	fl.Func("join", "a cgroup directory to join before starting the pod", func(s string) error {
		join = append(join, s)
		return nil
	})
	pidNS := fl.Bool("pid", false, "start the pod in a PID namespace of its own too")
	if err := fl.Parse(args); err != nil {
		return 0, err
	}
	if os.Getpid() == 1 {
		if err := privateMounts(); err != nil {
			return 0, err
		}
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return 0, fmt.Errorf("mount /proc: %w", err)
		}
	}
	for _, dir := range join {
		// "0" is the writer (kernel/cgroup/cgroup.c,
		// cgroup_procs_write_start), whatever its PID namespace.
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("0"), 0); err != nil {
			return 0, fmt.Errorf("join %s: %w", dir, err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, append([]string{podHelper}, fl.Args()...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	flags := uintptr(unix.CLONE_NEWCGROUP | unix.CLONE_NEWNS)
	if *pidNS {
		flags |= unix.CLONE_NEWPID
	}
	// The pod dies with its node: Pdeathsig follows the thread that
	// started it, which stays.
	runtime.LockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags, Pdeathsig: syscall.SIGKILL}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start the pod: %w", err)
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 0, err
}

func runPod(args []string) error {
	fl := flag.NewFlagSet(podHelper, flag.ContinueOnError)
	proc := fl.Bool("proc", false, "mount /proc for the pod's own PID namespace")
	remount := fl.String("remount", "", "MOUNT:TYPE:OPTIONS: the node's cgroup mount to move to -host-at, and the fresh one to mount in its place")
	hostAt := fl.String("host-at", "", "where the node's cgroup mount goes, as a hostPath volume")
	dropAdmin := fl.Bool("drop-sys-admin", false, "drop CAP_SYS_ADMIN from the bounding set")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() == 0 {
		return errors.New("no command")
	}
	if err := privateMounts(); err != nil {
		return err
	}
	if *proc {
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mount /proc: %w", err)
		}
	}
	if *remount != "" {
		f := strings.SplitN(*remount, ":", 3)
		if len(f) != 3 || *hostAt == "" {
			return fmt.Errorf("-remount %q: want MOUNT:TYPE:OPTIONS and -host-at", *remount)
		}
		mnt, fstype, opts := f[0], f[1], f[2]
		host := filepath.Join(*hostAt, mnt)
		if err := os.MkdirAll(host, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(mnt, host, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s at %s: %w", mnt, host, err)
		}
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", mnt, err)
		}
		if err := unix.Mount(fstype, mnt, fstype, 0, opts); err != nil {
			return fmt.Errorf("mount %s -o %q at %s: %w", fstype, opts, mnt, err)
		}
	}
	// The bounding set is per thread: drop it on the one that executes.
	runtime.LockOSThread()
	if *dropAdmin {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_SYS_ADMIN, 0, 0, 0); err != nil {
			return fmt.Errorf("drop CAP_SYS_ADMIN: %w", err)
		}
	}
	cmd := fl.Args()
	return syscall.Exec(cmd[0], cmd, os.Environ())
}

// privateMounts keeps the mounts of this mount namespace from propagating
// to the node's.
func privateMounts() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	return nil
}

// podCommand is the command line that runs argv in a pod (nodeHelper's
// and podHelper's flags, without the "--"), with the test binary as the
// helper, and the attributes of its process: with node, in a PID and mount
// namespace of its own whose init is the helper.
func podCommand(node, pod []string, onNode bool, argv ...string) ([]string, *syscall.SysProcAttr) {
	self, err := os.Executable()
	if err != nil {
		panic(err)
	}
	cmd := append(append([]string{self, nodeHelper}, node...), "--")
	cmd = append(append(cmd, pod...), "--")
	cmd = append(cmd, argv...)
	if !onNode {
		return cmd, nil
	}
	return cmd, &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWNS}
}
