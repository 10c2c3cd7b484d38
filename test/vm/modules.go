package vm

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// bootModules are the modules /init loads before it mounts the disk; their
// dependencies are added by moduleClosure. The Debian kernel builds virtio and
// ext4 as modules. ext4 asks the crypto API for "crc32c" at mount time
// (fs/ext4/super.c: ext4_fill_super); with no modprobe in the VM that request
// cannot load a module, so the generic implementation is loaded up front.
func bootModules() []string { return []string{"virtio_pci", "virtio_blk", "crc32c_generic", "ext4"} }

// builtinOK are the boot modules a kernel may build in instead: Debian's
// 7.x kernels build virtio_pci in, and their ext4 takes crc32c from
// lib/crc rather than the crypto API. A kernel package that ships no
// such module is taken to have it built in; a missing ext4 or
// virtio_blk is still an error here, not a VM that cannot mount its disk.
var builtinOK = map[string]bool{"virtio_pci": true, "crc32c_generic": true}

// moduleClosure returns the host paths of roots and of every module they
// depend on, in an order insmod accepts: each module after its dependencies.
// Dependencies are read from the depends= entry of each module's .modinfo
// section (what depmod reads; the Debian package ships no modules.dep).
func moduleClosure(modulesDir string, roots []string) ([]string, error) {
	index := make(map[string]string) // module name -> path
	err := filepath.WalkDir(filepath.Join(modulesDir, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name, ok := strings.CutSuffix(d.Name(), ".ko"); ok && !d.IsDir() {
			index[moduleName(name)] = p
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index modules: %w", err)
	}

	var order []string
	state := make(map[string]int) // 1: visiting, 2: done
	var visit func(name, from string) error
	visit = func(name, from string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("module %s: dependency cycle through %s", name, from)
		case 2:
			return nil
		}
		p, ok := index[name]
		if !ok {
			return fmt.Errorf("module %s (needed by %s): no %s.ko under %s", name, from, name, modulesDir)
		}
		state[name] = 1
		deps, err := moduleDepends(p)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d, name); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, p)
		return nil
	}
	for _, r := range roots {
		name := moduleName(r)
		if _, ok := index[name]; !ok && builtinOK[name] {
			continue
		}
		if err := visit(name, "boot"); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// moduleName normalises a module name as the kernel does: '-' and '_' are
// the same (kernel/module/main.c: the name comes from KBUILD_MODNAME).
func moduleName(s string) string { return strings.ReplaceAll(s, "-", "_") }

// moduleDepends reads the depends= entry of a module's .modinfo section, a
// sequence of NUL-terminated key=value strings
// (include/linux/moduleparam.h: __MODULE_INFO).
func moduleDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read module %s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("read module %s: no .modinfo section", path)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("read module %s: .modinfo: %w", path, err)
	}
	var deps []string
	for _, kv := range bytes.Split(data, []byte{0}) {
		if list, ok := bytes.CutPrefix(kv, []byte("depends=")); ok && len(list) > 0 {
			for _, d := range strings.Split(string(list), ",") {
				deps = append(deps, moduleName(d))
			}
		}
	}
	return deps, nil
}
