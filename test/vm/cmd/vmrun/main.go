// Command vmrun runs memcgd's tests, or a shell command (with memcgd on its
// PATH), inside a cgroup v2 (or v1) kernel under qemu, printing what the VM
// prints.
//
//	go run ./test/vm/cmd/vmrun -cgroup v2 -pkg ./cgroupfs -run 'TestX'
//	go run ./test/vm/cmd/vmrun -cgroup v1 -shell-cmd 'cat /proc/self/cgroup'
//	go run ./test/vm/cmd/vmrun -mem 4096 -env MEMCGD_OVERHEAD=1 -pkg ./test/daemon -run TestOverhead
//
// It exits with status 1 when a test fails, the VM crashes or times out, and
// 2 when the VM cannot be built. The kernel and busybox come from the cache
// that scripts/install-deps fills ($MEMCGD_VM_CACHE, /var/cache/memcgd-vm).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/memcgd/memcgd/test/vm"
)

// packageList is a repeatable flag whose values may also be comma lists.
type packageList []string

func (p *packageList) String() string { return strings.Join(*p, ",") }

func (p *packageList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*p = append(*p, s)
		}
	}
	return nil
}

// envList is a repeatable NAME=VALUE flag, checked as it is set so that a
// bad entry stops vmrun before it builds anything.
type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }

func (e *envList) Set(v string) error {
	if err := vm.CheckEnv(v); err != nil {
		return err
	}
	*e = append(*e, v)
	return nil
}

func main() {
	var (
		pkgs     packageList
		env      envList
		cgroup   = flag.String("cgroup", "v2", "cgroup layout in the VM: v1 or v2")
		run      = flag.String("run", "", "run only tests matching this regexp (-test.run)")
		mem      = flag.Int("mem", vm.DefaultMemoryMB, "guest memory in MB")
		bps      = flag.Int64("bps", vm.DefaultWriteBPS, "write limit of the VM's disk in bytes/s; -1 for none")
		timeout  = flag.Duration("timeout", vm.DefaultTimeout, "time limit of the VM run")
		testTime = flag.Duration("test-timeout", vm.DefaultTestTimeout, "time limit of each test binary (-test.timeout): past it the binary prints its goroutines and fails")
		shellCmd = flag.String("shell-cmd", "", "run this shell command in the VM instead of tests")
		keep     = flag.Bool("keep", false, "keep the work directory (initramfs, test binaries)")
		console  = flag.Bool("console", false, "print the kernel console as it arrives (to stderr)")
		kernel   = flag.String("kernel", vm.KernelCurrent, "the kernel of scripts/install-deps's cache to boot: current (Debian stable's) or paced (one memcgd paces on by default)")
		single   = flag.Bool("tcg-single", false, "run every vCPU on one host thread (qemu -accel tcg,thread=single), as TestVMPaced does: with a thread per vCPU, 7.2 hit an int3 at code other vCPUs were patching")
		cpu      = flag.Bool("cpu", false, "enable the cpu controller beneath the v2 root, for the pace, holding a CPU limit that never binds (with a TCG thread per vCPU Debian's 6.1 stalled while memcgd paced: add -tcg-single)")
	)
	flag.Var(&pkgs, "pkg", "package pattern to test in the VM; repeatable or a comma list (default: the VM suite)")
	flag.Var(&env, "env", "NAME=VALUE to add to the environment of every job in the VM (the tests or -shell-cmd); repeatable")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "vmrun: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if len(pkgs) == 0 {
		pkgs = vm.SuitePackages()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	work, err := os.MkdirTemp("", "memcgd-vm-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmrun: %v\n", err)
		os.Exit(2)
	}
	code := runVM(ctx, work, options{
		cgroup: vm.Cgroup(*cgroup), pkgs: pkgs, run: *run, mem: *mem, bps: *bps,
		timeout: *timeout, testTimeout: *testTime, shellCmd: *shellCmd, console: *console, env: env, cpu: *cpu, kernel: *kernel, single: *single,
	})
	if *keep {
		fmt.Fprintf(os.Stderr, "vmrun: work directory kept: %s\n", work)
	} else {
		os.RemoveAll(work)
	}
	os.Exit(code)
}

type options struct {
	cgroup      vm.Cgroup
	pkgs        []string
	run         string
	mem         int
	bps         int64
	timeout     time.Duration
	testTimeout time.Duration
	shellCmd    string
	console     bool
	env         []string
	cpu         bool
	kernel      string
	single      bool
}

// runVM builds the jobs, boots the VM and returns the exit status.
func runVM(ctx context.Context, work string, o options) int {
	assets, err := vm.LocateKernel(vm.DefaultCacheDir(), o.kernel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmrun: %v\n", err)
		return 2
	}
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmrun: %v\n", err)
		return 2
	}
	mod, err := vm.ModuleDir(ctx, wd)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmrun: %v\n", err)
		return 2
	}
	bin := filepath.Join(work, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "vmrun: %v\n", err)
		return 2
	}
	start := time.Now()
	var jobs []vm.Job
	if o.shellCmd != "" {
		// The suite's commands (memcgd) are on the shell's PATH too.
		job := vm.ShellJob(o.shellCmd)
		if job.Files, err = vm.BuildCommands(ctx, mod, vm.SuiteCommands(), bin); err != nil {
			fmt.Fprintf(os.Stderr, "vmrun: %v\n", err)
			return 2
		}
		jobs = []vm.Job{job}
		fmt.Fprintf(os.Stderr, "vmrun: built %s in %v\n", strings.Join(vm.SuiteCommands(), ", "), time.Since(start).Round(time.Millisecond))
	} else {
		if jobs, err = vm.TestJobs(ctx, mod, o.pkgs, o.run, o.testTimeout, bin); err != nil {
			fmt.Fprintf(os.Stderr, "vmrun: %v\n", err)
			return 2
		}
		fmt.Fprintf(os.Stderr, "vmrun: built %d test binaries in %v\n", len(jobs), time.Since(start).Round(time.Millisecond))
	}
	for i := range jobs {
		jobs[i].Env = o.env
	}
	cfg := vm.Config{
		Assets: assets, Cgroup: o.cgroup, MemoryMB: o.mem, WriteBPS: o.bps,
		Timeout: o.timeout, WorkDir: work, Output: os.Stdout, CPUController: o.cpu, SingleThreadTCG: o.single,
	}
	if o.console {
		cfg.Console = os.Stderr
	}
	start = time.Now()
	report, err := vm.Run(ctx, cfg, jobs)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmrun: %v\n", err)
		return 2
	}
	elapsed := time.Since(start).Round(time.Millisecond)
	if err := report.Err(); err != nil {
		if !o.console {
			fmt.Fprintln(os.Stderr, "vmrun: kernel console:")
			io.Copy(os.Stderr, strings.NewReader(string(report.Console)))
		}
		fmt.Fprintf(os.Stderr, "vmrun: FAIL (%v, cgroup %s):\n%v\n", elapsed, o.cgroup, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "vmrun: ok (%v, cgroup %s, %d jobs)\n", elapsed, o.cgroup, len(jobs))
	return 0
}
