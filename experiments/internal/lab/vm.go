package lab

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/memcgd/memcgd/test/vm"
)

// VMFlags run an experiment inside a test VM (test/vm): a Debian kernel
// under qemu with TCG, with the cgroup layout Cgroup sets up and its
// scratch files on an ext4 disk whose writes qemu throttles to WriteBPS.
type VMFlags struct {
	// Cgroup is the VM's cgroup layout, "v1" or "v2"; "" runs the
	// experiment on this machine.
	Cgroup string
	// MemoryMB is the guest's memory.
	MemoryMB int
	// WriteBPS is the disk's write limit in bytes per second.
	WriteBPS int64
	// Timeout bounds the whole VM run.
	Timeout time.Duration
	// CPU enables the cpu controller on v2 (vm.Config.CPUController).
	CPU bool
	// Kernel is the cache's kernel to boot (vm.KernelCurrent,
	// vm.KernelPaced).
	Kernel string
}

// Defaults of VMFlags. The experiment's sizes are scaled to this: a 50
// MB/s disk, and a guest several times slower than the host under TCG.
const (
	DefaultVMMemoryMB = 3072
	DefaultVMTimeout  = 40 * time.Minute
)

// register defines the -vm flags on fs.
func (v *VMFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&v.Cgroup, "vm", "", "run inside a test VM with this cgroup layout (v1 or v2) instead of on this machine")
	fs.IntVar(&v.MemoryMB, "vm-mem", DefaultVMMemoryMB, "with -vm: guest memory in MB")
	fs.Int64Var(&v.WriteBPS, "vm-bps", vm.DefaultWriteBPS, "with -vm: write limit of the VM's disk in bytes/s")
	fs.DurationVar(&v.Timeout, "vm-timeout", DefaultVMTimeout, "with -vm: time limit of the VM run")
	fs.StringVar(&v.Kernel, "vm-kernel", vm.KernelCurrent, "with -vm: the kernel to boot, current (Debian stable's) or paced (one memcgd paces on by default; scripts/install-deps)")
	fs.BoolVar(&v.CPU, "vm-cpu", false, "with -vm v2: enable the cpu controller, which the pace needs (off: on Debian's 6.1 the VM stalled while memcgd paced)")
}

// hostOnly are the flags that say how to run the experiment, not what it
// measures: they are not passed on into the VM.
var hostOnly = []string{"vm", "vm-mem", "vm-bps", "vm-timeout", "vm-cpu", "vm-kernel", "scratch", "memcgd", "writer", "victim", "revision"}

// runInVM builds the experiment name, the writer and memcgd as static
// binaries, boots a VM with them and runs the experiment inside, its
// scratch directory on the VM's throttled disk, printing what it prints.
// The experiment's flags set on the command line are passed on, over
// f.VMDefaults.
func runInVM(ctx context.Context, name string, f Flags) error {
	if f.VM.Cgroup != string(vm.CgroupV1) && f.VM.Cgroup != string(vm.CgroupV2) {
		return fmt.Errorf("-vm: invalid value %q: want v1 or v2", f.VM.Cgroup)
	}
	if f.VM.WriteBPS <= 0 {
		return fmt.Errorf("-vm-bps: invalid value %d: want a positive rate, the disk must be slower than memory", f.VM.WriteBPS)
	}
	assets, err := vm.LocateKernel(vm.DefaultCacheDir(), f.VM.Kernel)
	if err != nil {
		return err
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	mod, err := vm.ModuleDir(ctx, wd)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "memcgd-exp-vm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	pkgs := []string{name, "./experiments/writer", "./cmd/memcgd"}
	if f.UsesVictim {
		pkgs = append(pkgs, "./experiments/victim")
	}
	files, err := vm.BuildCommands(ctx, mod, pkgs, work)
	if err != nil {
		return err
	}
	args := []string{"/bin/" + path.Base(name), "-scratch", "/mnt", "-memcgd", "/bin/memcgd", "-writer", "/bin/writer",
		"-revision", revision()}
	if f.UsesVictim {
		args = append(args, "-victim", "/bin/victim")
	}
	args = append(args, experimentArgs(flag.CommandLine, f.VMDefaults)...)
	// The VM boots without network (qemu -nodefaults): memcgd's metrics
	// endpoint needs the loopback interface up.
	job := vm.Job{Name: path.Base(name), Dir: "/mnt",
		Args:  append([]string{"sh", "-c", `ifconfig lo 127.0.0.1 up && exec "$@"`, "sh"}, args...),
		Files: files}

	fmt.Printf("$ go run %s %s\n\n", name, strings.Join(quoteAll(os.Args[1:]), " "))
	fmt.Printf("In a VM: the Debian kernel %s under qemu (TCG, %d CPUs, %d MB), cgroup %s%s, "+
		"scratch files on an ext4 virtio disk whose writes qemu throttles to %.1f MiB/s (%d bytes/s). "+
		"Inside, the VM runs:\n\n    %s\n\n",
		assets.Release, vm.DefaultCPUs, f.VM.MemoryMB, f.VM.Cgroup, cpuNote(f.VM.CPU), MiB(uint64(f.VM.WriteBPS)), f.VM.WriteBPS, strings.Join(quoteAll(args), " "))
	out := &markerFilter{w: os.Stdout}
	report, err := vm.Run(ctx, vm.Config{
		Assets: assets, Cgroup: vm.Cgroup(f.VM.Cgroup), MemoryMB: f.VM.MemoryMB, WriteBPS: f.VM.WriteBPS,
		Timeout: f.VM.Timeout, WorkDir: work, Output: out, CPUController: f.VM.CPU,
	}, []vm.Job{job})
	if err != nil {
		return err
	}
	if err := report.Err(); err != nil {
		return fmt.Errorf("in the VM: %w\nkernel console:\n%s", err, tail(report.Console, 40))
	}
	return nil
}

// cpuNote says whether the VM's cgroups have the cpu controller.
func cpuNote(on bool) string {
	if on {
		return " with the cpu controller"
	}
	return " without the cpu controller"
}

// experimentArgs are the flags of fs to pass into the VM: defaults, then
// those set on the command line over them, but the host-only ones.
func experimentArgs(fs *flag.FlagSet, defaults map[string]string) []string {
	set := make(map[string]string, len(defaults))
	for k, v := range defaults {
		set[k] = v
	}
	fs.Visit(func(fl *flag.Flag) {
		if !slices.Contains(hostOnly, fl.Name) {
			set[fl.Name] = fl.Value.String()
		}
	})
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, k)
	}
	slices.Sort(names)
	args := make([]string, len(names))
	for i, k := range names {
		args[i] = "-" + k + "=" + set[k]
	}
	return args
}

func quoteAll(args []string) []string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return q
}

// tail is the last n lines of b.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// markerFilter passes on the VM's results port line by line, without
// test/vm's marker lines (doc.go there).
type markerFilter struct {
	w       io.Writer
	partial []byte
}

func (m *markerFilter) Write(p []byte) (int, error) {
	m.partial = append(m.partial, p...)
	for {
		i := bytes.IndexByte(m.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := m.partial[:i+1]
		if !bytes.HasPrefix(line, []byte("@@memcgd-vm ")) {
			if _, err := m.w.Write(line); err != nil {
				return len(p), err
			}
		}
		m.partial = m.partial[i+1:]
	}
}
