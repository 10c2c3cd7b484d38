package vm

import (
	_ "embed"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// initScript is the VM's /init.
//
//go:embed init.sh
var initScript []byte

// writeInitramfs writes the VM's root filesystem as an uncompressed newc
// archive: busybox, the boot modules, /init, the job list and every job's
// files. Uncompressed, because under TCG the guest decompresses gzip far more
// slowly than qemu loads the extra bytes.
func writeInitramfs(file string, a Assets, jobs []Job) (err error) {
	mods, err := moduleClosure(a.ModulesDir, bootModules())
	if err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("create initramfs: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write initramfs %s: %w", file, cerr)
		}
	}()
	c := newCPIOWriter(f)
	for _, d := range []string{"proc", "sys", "dev", "mnt", "tmp", "root"} {
		if err := c.mkdirAll(d); err != nil {
			return fmt.Errorf("write initramfs %s: %w", file, err)
		}
	}
	if err := c.bytes("init", 0o755, initScript); err != nil {
		return fmt.Errorf("write initramfs %s: %w", file, err)
	}
	if err := c.copyFile("bin/busybox", a.Busybox); err != nil {
		return fmt.Errorf("write initramfs %s: busybox: %w", file, err)
	}
	var order strings.Builder
	for _, m := range mods {
		name := filepath.Base(m)
		if err := c.copyFile(path.Join("lib/modules", name), m); err != nil {
			return fmt.Errorf("write initramfs %s: module: %w", file, err)
		}
		fmt.Fprintln(&order, name)
	}
	if err := c.bytes("vm/modules", 0o644, []byte(order.String())); err != nil {
		return fmt.Errorf("write initramfs %s: %w", file, err)
	}
	if err := c.bytes("vm/jobs", 0o644, jobsScript(jobs)); err != nil {
		return fmt.Errorf("write initramfs %s: %w", file, err)
	}
	// Jobs may share a file (the commands TestJobs adds to every job): it
	// is archived once.
	archived := make(map[string]string)
	for _, j := range jobs {
		dsts := make([]string, 0, len(j.Files))
		for dst := range j.Files {
			dsts = append(dsts, dst)
		}
		sort.Strings(dsts)
		for _, dst := range dsts {
			if archived[dst] == j.Files[dst] {
				continue
			}
			archived[dst] = j.Files[dst]
			if err := c.copyTree(dst, j.Files[dst]); err != nil {
				return fmt.Errorf("write initramfs %s: job %s: %w", file, j.Name, err)
			}
		}
		// Directories on the disk are made by the job itself.
		if !strings.HasPrefix(j.Dir, "/mnt/") {
			if err := c.mkdirAll(j.Dir); err != nil {
				return fmt.Errorf("write initramfs %s: %w", file, err)
			}
		}
	}
	if err := c.close(); err != nil {
		return fmt.Errorf("write initramfs %s: %w", file, err)
	}
	return nil
}
