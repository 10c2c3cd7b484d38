package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A Cgroup selects the cgroup layout /init sets up.
type Cgroup string

const (
	// CgroupV2 mounts cgroup2 at /sys/fs/cgroup with the memory and io
	// controllers enabled for the root's children; jobs run in the root.
	CgroupV2 Cgroup = "v2"
	// CgroupV1 mounts the v1 memory and freezer controllers at
	// /sys/fs/cgroup/{memory,freezer} and an empty cgroup2 hierarchy at
	// /sys/fs/cgroup/unified, like a hybrid host; jobs run in the memory
	// cgroup /memcgd-vm.
	CgroupV1 Cgroup = "v1"
)

// Defaults of Config.
const (
	DefaultMemoryMB  = 1024
	DefaultCPUs      = 2
	DefaultDiskBytes = 2 << 30
	DefaultWriteBPS  = 50 << 20
	DefaultTimeout   = 20 * time.Minute
)

// Config describes one VM.
type Config struct {
	Assets    Assets
	Cgroup    Cgroup
	MemoryMB  int           // guest memory (qemu -m); 0 means DefaultMemoryMB
	CPUs      int           // qemu -smp; 0 means DefaultCPUs
	DiskBytes int64         // size of the ext4 disk at /mnt; 0 means DefaultDiskBytes
	WriteBPS  int64         // qemu write limit of the disk in bytes/s; 0 means DefaultWriteBPS, <0 unthrottled
	Timeout   time.Duration // from qemu start to power-off; 0 means DefaultTimeout
	// CPUController enables the cpu controller beneath the v2 root, which
	// the pace's CFS bandwidth needs. Off by default: on Debian's 6.1 the
	// VM stalled while memcgd paced (docs/throttle.md, "Per kernel and
	// hierarchy"). The v1 layout has no cpu hierarchy either way.
	CPUController bool
	// SingleThreadTCG runs every vCPU on one host thread (qemu -accel
	// tcg,thread=single). With a thread per vCPU, Debian unstable's 7.2
	// hit an int3 ("Oops: int3") at static-key and tracepoint sites a
	// vCPU was patching while another ran them (__folio_mark_dirty, as the
	// tracker attached, set_next_task_fair, as CFS bandwidth's key
	// switched): a vCPU ran its stale translation of the code. Slower.
	SingleThreadTCG bool
	// WorkDir receives the initramfs and the disk image; it must exist, and
	// the caller removes it (the disk holds up to DiskBytes after a run).
	WorkDir string
	// Console and Output, when not nil, receive the kernel console and the
	// results port as they arrive (for a live view); the Report has both.
	Console io.Writer
	Output  io.Writer
}

func (c Config) withDefaults() Config {
	if c.MemoryMB == 0 {
		c.MemoryMB = DefaultMemoryMB
	}
	if c.CPUs == 0 {
		c.CPUs = DefaultCPUs
	}
	if c.DiskBytes == 0 {
		c.DiskBytes = DefaultDiskBytes
	}
	if c.WriteBPS == 0 {
		c.WriteBPS = DefaultWriteBPS
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Cgroup != CgroupV1 && c.Cgroup != CgroupV2:
		return fmt.Errorf("cgroup %q: want %q or %q", c.Cgroup, CgroupV1, CgroupV2)
	case c.MemoryMB < 256:
		return fmt.Errorf("memory %d MB: want at least 256", c.MemoryMB)
	case c.CPUs < 1:
		return fmt.Errorf("cpus %d: want at least 1", c.CPUs)
	case c.DiskBytes < 64<<20:
		return fmt.Errorf("disk size %d bytes: want at least 64 MiB", c.DiskBytes)
	case c.Timeout < 0:
		return fmt.Errorf("timeout %v: want a positive duration", c.Timeout)
	case c.WorkDir == "":
		return errors.New("work dir empty: want an existing directory")
	}
	return nil
}

// Run boots a VM, runs jobs in it in order, and returns what each did. The
// error is for a VM that could not be built or started; what happened inside
// (failures, panics, a timeout) is in the Report, and Report.Err sums it up.
func Run(ctx context.Context, cfg Config, jobs []Job) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("vm config: %w", err)
	}
	seen := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		if err := j.validate(); err != nil {
			return nil, err
		}
		if seen[j.Name] {
			return nil, fmt.Errorf("job name %q: used twice, want unique names", j.Name)
		}
		seen[j.Name] = true
	}
	initrd := filepath.Join(cfg.WorkDir, "initramfs.cpio")
	if err := writeInitramfs(initrd, cfg.Assets, jobs); err != nil {
		return nil, err
	}
	disk := filepath.Join(cfg.WorkDir, "disk.img")
	if err := makeDisk(ctx, cfg.Assets.Mkfs, disk, cfg.DiskBytes); err != nil {
		return nil, err
	}

	stream, console, timedOut, err := runQemu(ctx, cfg, initrd, disk)
	if err != nil {
		return nil, err
	}
	r := parseReport(jobs, stream, console)
	r.TimedOut = timedOut
	return r, nil
}

// qemuArgs returns the qemu command line. The console goes to fd 3 and the
// results port to fd 4 (see runQemu); -nodefaults drops the network card and
// its option ROM, which saves a second of boot under TCG.
func qemuArgs(cfg Config, initrd, disk string) []string {
	drive := "file=" + disk + ",format=raw,if=virtio"
	if cfg.WriteBPS > 0 {
		drive += ",throttling.bps-write=" + strconv.FormatInt(cfg.WriteBPS, 10)
	}
	// loglevel=5 in place of quiet: a soft lockup's registers and stack
	// print at the default message level (4), which quiet hides
	// (kernel/watchdog.c watchdog_timer_fn), and a hang then says where,
	// on every CPU. softlockup_panic ends the VM there (panic=-1 with
	// -no-reboot): the report's kernel line already fails the run
	// (kernelCrash), so waiting for the timeout would only cost minutes.
	params := []string{
		"console=ttyS0", "loglevel=5", "softlockup_all_cpu_backtrace=1", "softlockup_panic=1", "panic=-1",
		"memcgd.cgroup=" + string(cfg.Cgroup),
		"memcgd.write_bps=" + strconv.FormatInt(max(cfg.WriteBPS, 0), 10),
	}
	if cfg.CPUController {
		params = append(params, "memcgd.cpu=1")
	}
	return []string{
		"-nodefaults", "-no-user-config", "-display", "none",
		// /dev/kvm exists on these hosts but KVM guests hang at boot.
		"-accel", tcgAccel(cfg.SingleThreadTCG),
		"-m", strconv.Itoa(cfg.MemoryMB),
		"-smp", strconv.Itoa(cfg.CPUs),
		"-no-reboot",
		"-kernel", cfg.Assets.Kernel,
		"-initrd", initrd,
		"-append", strings.Join(params, " "),
		"-chardev", "file,id=console,path=/dev/fd/3",
		"-serial", "chardev:console",
		"-chardev", "file,id=results,path=/dev/fd/4",
		"-serial", "chardev:results",
		"-drive", drive,
	}
}

// tcgAccel is qemu's -accel value: TCG, with one host thread for all
// vCPUs when single.
func tcgAccel(single bool) string {
	if single {
		return "tcg,thread=single"
	}
	return "tcg"
}

// runQemu runs the VM to power-off or timeout, collecting both serial ports.
func runQemu(ctx context.Context, cfg Config, initrd, disk string) (stream, console []byte, timedOut bool, err error) {
	tctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, cfg.Assets.Qemu, qemuArgs(cfg, initrd, disk)...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	conR, conW, err := os.Pipe()
	if err != nil {
		return nil, nil, false, fmt.Errorf("console pipe: %w", err)
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		conR.Close()
		conW.Close()
		return nil, nil, false, fmt.Errorf("results pipe: %w", err)
	}
	cmd.ExtraFiles = []*os.File{conW, resW}
	var conBuf, resBuf bytes.Buffer
	var wg sync.WaitGroup
	collect := func(r *os.File, buf *bytes.Buffer, live io.Writer) {
		defer wg.Done()
		defer r.Close()
		w := io.Writer(buf)
		if live != nil {
			w = io.MultiWriter(buf, live)
		}
		io.Copy(w, r) // ends at EOF, when qemu exits or is killed
	}
	err = cmd.Start()
	conW.Close()
	resW.Close()
	if err != nil {
		conR.Close()
		resR.Close()
		return nil, nil, false, fmt.Errorf("start %s: %w", cfg.Assets.Qemu, err)
	}
	wg.Add(2)
	go collect(conR, &conBuf, cfg.Console)
	go collect(resR, &resBuf, cfg.Output)
	werr := cmd.Wait()
	wg.Wait()
	switch {
	case ctx.Err() != nil:
		return nil, nil, false, fmt.Errorf("run VM: %w", ctx.Err())
	case tctx.Err() != nil:
		return resBuf.Bytes(), conBuf.Bytes(), true, nil
	case werr != nil:
		return nil, nil, false, fmt.Errorf("qemu: %w\n%s", werr, stderr.Bytes())
	}
	return resBuf.Bytes(), conBuf.Bytes(), false, nil
}
