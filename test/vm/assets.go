package vm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrNotInstalled reports that a host dependency of the VM harness is missing:
// the kernel package in the cache, busybox, qemu or e2fsprogs. Tests skip on it
// outside CI; scripts/install-deps installs all of them.
var ErrNotInstalled = errors.New("not installed (run scripts/install-deps as root)")

// CacheEnv names the environment variable that overrides DefaultCacheDir.
const CacheEnv = "MEMCGD_VM_CACHE"

// DefaultCacheDir returns the cache directory scripts/install-deps fills:
// $MEMCGD_VM_CACHE, or /var/cache/memcgd-vm.
func DefaultCacheDir() string {
	if d := os.Getenv(CacheEnv); d != "" {
		return d
	}
	return "/var/cache/memcgd-vm"
}

// The kernels scripts/install-deps unpacks into the cache, by the name of
// their link in <cache>/kernel: Debian's stable kernel, which the suite
// runs on, and one memcgd paces on by default (6.18 or later: Debian
// unstable's), which runs the pace tests on cgroup v2.
const (
	KernelCurrent = "current"
	KernelPaced   = "paced"
)

// Assets are the host files a VM boots from.
type Assets struct {
	Kernel     string // bzImage: <cache>/kernel/<link>/boot/vmlinuz-<release>
	Release    string // kernel release, e.g. 6.1.0-57-amd64
	ModulesDir string // <cache>/kernel/<link>/lib/modules/<release>
	Busybox    string // statically linked busybox: <cache>/busybox
	Qemu       string // qemu-system-x86_64
	Mkfs       string // mkfs.ext4
}

// LocateAssets finds the stable kernel (KernelCurrent), its modules and
// busybox in the cache directory laid out by scripts/install-deps, and
// qemu and mkfs.ext4 on the PATH (or in /usr/sbin and /sbin, which a
// non-login root shell may lack). A missing piece is reported as an error
// wrapping ErrNotInstalled.
func LocateAssets(cacheDir string) (Assets, error) { return LocateKernel(cacheDir, KernelCurrent) }

// LocateKernel is LocateAssets with the kernel linked as link in
// <cache>/kernel (KernelCurrent, KernelPaced).
func LocateKernel(cacheDir, link string) (Assets, error) {
	kroot := filepath.Join(cacheDir, "kernel", link)
	kernels, err := filepath.Glob(filepath.Join(kroot, "boot", "vmlinuz-*"))
	if err != nil || len(kernels) != 1 {
		return Assets{}, fmt.Errorf("kernel %s: want one boot/vmlinuz-*, found %d: %w",
			kroot, len(kernels), ErrNotInstalled)
	}
	a := Assets{
		Kernel:  kernels[0],
		Release: strings.TrimPrefix(filepath.Base(kernels[0]), "vmlinuz-"),
		Busybox: filepath.Join(cacheDir, "busybox"),
	}
	a.ModulesDir = filepath.Join(kroot, "lib", "modules", a.Release)
	for _, p := range []string{a.ModulesDir, a.Busybox} {
		if _, err := os.Stat(p); err != nil {
			return Assets{}, fmt.Errorf("%w: %w", err, ErrNotInstalled)
		}
	}
	// The programs a run executes on the host, and their Debian packages.
	tools := []struct{ name, pkg string }{
		{"qemu-system-x86_64", "qemu-system-x86"},
		{"mkfs.ext4", "e2fsprogs"},
	}
	paths := make([]string, len(tools))
	for i, t := range tools {
		p, err := lookTool(t.name)
		if err != nil {
			return Assets{}, fmt.Errorf("%s (Debian package %s): %w", t.name, t.pkg, ErrNotInstalled)
		}
		paths[i] = p
	}
	a.Qemu, a.Mkfs = paths[0], paths[1]
	return a, nil
}

func lookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}
