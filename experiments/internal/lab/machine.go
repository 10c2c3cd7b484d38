package lab

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/format"
	"github.com/memcgd/memcgd/internal/sandbox"
)

// DropCaches writes all dirty data back (sync) and drops the clean page
// cache, dentries and inodes (/proc/sys/vm/drop_caches, 3), so that every
// run starts from the same empty cache and no run's writeback spills into
// the next.
func DropCaches() error {
	unix.Sync()
	return sandbox.WriteFile("/proc/sys/vm/drop_caches", "3")
}

// VMDirty are the global writeback sysctls (Documentation/admin-guide/sysctl/vm.rst).
type VMDirty struct {
	Ratio, BackgroundRatio uint64 // percent of dirtyable memory
	Bytes, BackgroundBytes uint64 // 0 when the ratio is in force
	ExpireCentisecs        uint64 // age at which the flusher writes a dirty inode
	WritebackCentisecs     uint64 // period of the flusher's periodic wake-up
}

// ReadVMDirty reads /proc/sys/vm/dirty_*.
func ReadVMDirty() (VMDirty, error) {
	var v VMDirty
	for _, f := range []struct {
		name string
		dst  *uint64
	}{
		{"dirty_ratio", &v.Ratio},
		{"dirty_background_ratio", &v.BackgroundRatio},
		{"dirty_bytes", &v.Bytes},
		{"dirty_background_bytes", &v.BackgroundBytes},
		{"dirty_expire_centisecs", &v.ExpireCentisecs},
		{"dirty_writeback_centisecs", &v.WritebackCentisecs},
	} {
		p := filepath.Join("/proc/sys/vm", f.name)
		b, err := os.ReadFile(p)
		if err != nil {
			return VMDirty{}, fmt.Errorf("read %s: %w", p, err)
		}
		if *f.dst, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil {
			return VMDirty{}, fmt.Errorf("read %s: %w", p, err)
		}
	}
	return v, nil
}

// BackgroundThresh estimates the global dirty background threshold in
// bytes: dirty_background_bytes, or dirty_background_ratio percent of
// dirtyable memory, which mm/page-writeback.c (global_dirtyable_memory)
// takes as free plus file pages less reserves and which MemAvailable
// approximates from below.
func (v VMDirty) BackgroundThresh(memAvailable uint64) uint64 {
	if v.BackgroundBytes != 0 {
		return v.BackgroundBytes
	}
	return memAvailable / 100 * v.BackgroundRatio
}

// MemInfo returns the fields of /proc/meminfo in bytes, by name.
func MemInfo() (map[string]uint64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return nil, fmt.Errorf("read /proc/meminfo: %w", err)
	}
	m := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		if len(f) == 3 && f[2] == "kB" {
			n <<= 10
		}
		m[strings.TrimSuffix(f[0], ":")] = n
	}
	return m, nil
}

// LoadAvg is the first three fields of /proc/loadavg: the load averages
// over 1, 5 and 15 minutes, as "2.45 1.16 0.50".
func LoadAvg() (string, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "", fmt.Errorf("read /proc/loadavg: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "", fmt.Errorf("read /proc/loadavg: %q: want at least 3 fields", b)
	}
	return strings.Join(f[:3], " "), nil
}

// Describe returns the machine's description in markdown: kernel, CPUs,
// memory, the disk under dir, the cgroup layout and the writeback
// sysctls.
func (l *Lab) Describe() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", fmt.Errorf("uname: %w", err)
	}
	mi, err := MemInfo()
	if err != nil {
		return "", err
	}
	v, err := ReadVMDirty()
	if err != nil {
		return "", err
	}
	disk, err := diskOf(l.Dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "- kernel: %s %s\n", unix.ByteSliceToString(u.Sysname[:]), unix.ByteSliceToString(u.Release[:]))
	fmt.Fprintf(&b, "- CPUs: %d (%s)\n", runtime.NumCPU(), cpuModel())
	fmt.Fprintf(&b, "- memory: %.1f GiB total, %.1f GiB available, swap %.1f GiB\n",
		gib(mi["MemTotal"]), gib(mi["MemAvailable"]), gib(mi["SwapTotal"]))
	fmt.Fprintf(&b, "- disk: %s\n", disk)
	if m, err := mountOf(l.Dir); err == nil && m.FSType == "ext4" {
		// Without a journal there are no jbd2 commits for an fsync to
		// wait on: what a neighbour's fsync waits for differs.
		switch j, ok, err := l.Journal(); {
		case err != nil:
			fmt.Fprintf(&b, "- ext4 journal: unknown (%v)\n", err)
		case ok:
			fmt.Fprintf(&b, "- ext4 journal: yes (jbd2 thread %d)\n", j.Pid)
		default:
			fmt.Fprintf(&b, "- ext4 journal: none (the filesystem was made without one)\n")
		}
	}
	if bps := os.Getenv("MEMCGD_VM_WRITE_BPS"); os.Getenv("MEMCGD_VM") == "1" && bps != "" {
		// test/vm's init passes qemu's throttle on (init.sh).
		fmt.Fprintf(&b, "- disk write limit: %s bytes/s (qemu throttling.bps-write of the test VM)\n", bps)
	}
	fmt.Fprintf(&b, "- cgroups: memory %s at %s", l.Layout.Memory.Version, l.Layout.Memory.Mount)
	if u := l.Layout.Unified; u != nil {
		fmt.Fprintf(&b, ", unified at %s", u.Mount)
	}
	if f := l.Layout.Freezer; f != nil {
		fmt.Fprintf(&b, ", freezer v1 at %s", f.Mount)
	}
	fmt.Fprintf(&b, "; experiment cgroups beneath %s\n", l.Root.Path)
	rev := l.revision
	if rev == "" {
		rev = revision()
	}
	fmt.Fprintf(&b, "- memcgd: %s\n", rev)
	if load, err := LoadAvg(); err == nil {
		// Other tenants' work (another test run, a build) makes timing
		// figures noisy: the reader should know it was there.
		fmt.Fprintf(&b, "- load average (1, 5, 15 min) at the start: %s\n", load)
	}
	fmt.Fprintf(&b, "- vm.dirty_ratio %d, dirty_background_ratio %d, dirty_bytes %d, dirty_background_bytes %d, "+
		"dirty_expire_centisecs %d, dirty_writeback_centisecs %d (background threshold about %.0f MiB)\n",
		v.Ratio, v.BackgroundRatio, v.Bytes, v.BackgroundBytes, v.ExpireCentisecs, v.WritebackCentisecs,
		mib(v.BackgroundThresh(mi["MemAvailable"])))
	return b.String(), nil
}

// revision names the source tree the binaries were built from: the git
// commit and how many files differ from it.
func revision() string {
	head, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "revision unknown (not a git checkout)"
	}
	st, err := exec.Command("git", "status", "--porcelain").Output()
	if err != nil {
		return "commit " + strings.TrimSpace(string(head))
	}
	n := len(strings.Split(strings.TrimSpace(string(st)), "\n"))
	if len(bytes.TrimSpace(st)) == 0 {
		n = 0
	}
	return fmt.Sprintf("commit %s with %d files changed or added since", strings.TrimSpace(string(head)), n)
}

func gib(n uint64) float64 { return float64(n) / (1 << 30) }
func mib(n uint64) float64 { return float64(n) / (1 << 20) }

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "model unknown"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "model unknown"
}

// mountOf is the mount holding dir: the longest mount point that is dir
// or one of its parents.
func mountOf(dir string) (format.Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return format.Mount{}, fmt.Errorf("read mountinfo: %w", err)
	}
	defer f.Close()
	mounts, err := format.ParseMountInfo(f)
	if err != nil {
		return format.Mount{}, fmt.Errorf("read mountinfo: %w", err)
	}
	var best format.Mount
	for _, m := range mounts {
		if (dir == m.MountPoint || strings.HasPrefix(dir, strings.TrimSuffix(m.MountPoint, "/")+"/")) &&
			len(m.MountPoint) >= len(best.MountPoint) {
			best = m
		}
	}
	return best, nil
}

// diskOf describes the filesystem holding dir and its block device.
func diskOf(dir string) (string, error) {
	best, err := mountOf(dir)
	if err != nil {
		return "", err
	}
	desc := fmt.Sprintf("%s (%s on %s), files in %s", best.Source, best.FSType, best.MountPoint, dir)
	dev := filepath.Base(best.Source)
	queue := filepath.Join("/sys/class/block", dev, "queue")
	if _, err := os.Stat(queue); err != nil {
		return desc, nil
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(queue, name))
		return strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%s; rotational %s, scheduler %s, wbt_lat_usec %s, nr_requests %s, max_sectors_kb %s, write_cache %s",
		desc, read("rotational"), read("scheduler"), read("wbt_lat_usec"), read("nr_requests"), read("max_sectors_kb"), read("write_cache")), nil
}
