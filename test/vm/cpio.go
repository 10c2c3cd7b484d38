package vm

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// cpioWriter writes the "newc" cpio archive format, the one the kernel
// unpacks as an initramfs (init/initramfs.c; Documentation/driver-api/
// early-userspace/buffer-format.rst). It creates parent directories on
// demand, so callers only name the files they need.
type cpioWriter struct {
	w    *bufio.Writer
	ino  uint32
	dirs map[string]bool
}

func newCPIOWriter(w io.Writer) *cpioWriter {
	return &cpioWriter{w: bufio.NewWriterSize(w, 1<<20), dirs: map[string]bool{".": true, "/": true}}
}

// header writes one entry's header and name, padded to 4 bytes. Fields are
// 8 hex digits: ino mode uid gid nlink mtime filesize devmajor devminor
// rdevmajor rdevminor namesize check.
func (c *cpioWriter) header(name string, mode uint32, size int64) error {
	if size > 0xffffffff {
		return fmt.Errorf("cpio %s: size %d exceeds the newc limit of 4 GiB", name, size)
	}
	c.ino++
	nlink := uint32(1)
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	_, err := fmt.Fprintf(c.w, "070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%s\x00",
		c.ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name)+1, 0, name)
	if err != nil {
		return err
	}
	return c.pad(110 + int64(len(name)) + 1)
}

func (c *cpioWriter) pad(n int64) error {
	_, err := c.w.WriteString("\x00\x00\x00"[:(4-n%4)%4])
	return err
}

// mkdirAll adds directory entries for p and its parents not yet written.
func (c *cpioWriter) mkdirAll(p string) error {
	p = path.Clean(strings.TrimPrefix(p, "/"))
	if c.dirs[p] {
		return nil
	}
	if err := c.mkdirAll(path.Dir(p)); err != nil {
		return err
	}
	c.dirs[p] = true
	return c.header(p, 0o040755, 0)
}

// bytes adds a regular file with the given content.
func (c *cpioWriter) bytes(name string, perm fs.FileMode, data []byte) error {
	name = strings.TrimPrefix(path.Clean(name), "/")
	if err := c.mkdirAll(path.Dir(name)); err != nil {
		return err
	}
	if err := c.header(name, 0o100000|uint32(perm.Perm()), int64(len(data))); err != nil {
		return err
	}
	if _, err := c.w.Write(data); err != nil {
		return err
	}
	return c.pad(int64(len(data)))
}

// copyFile adds the host file src as name, keeping its permission bits.
func (c *cpioWriter) copyFile(name, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	name = strings.TrimPrefix(path.Clean(name), "/")
	if err := c.mkdirAll(path.Dir(name)); err != nil {
		return err
	}
	if err := c.header(name, 0o100000|uint32(fi.Mode().Perm()), fi.Size()); err != nil {
		return err
	}
	n, err := io.Copy(c.w, f)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if n != fi.Size() {
		return fmt.Errorf("copy %s: size changed from %d to %d while archiving", src, fi.Size(), n)
	}
	return c.pad(n)
}

// copyTree adds the host path src as name: a file, or a directory with
// everything below it. Symbolic links are followed.
func (c *cpioWriter) copyTree(name, src string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		dst := path.Join(name, filepath.ToSlash(rel))
		if d.IsDir() {
			return c.mkdirAll(dst)
		}
		return c.copyFile(dst, p)
	})
}

// close writes the trailer entry and flushes.
func (c *cpioWriter) close() error {
	if err := c.header("TRAILER!!!", 0, 0); err != nil {
		return err
	}
	return c.w.Flush()
}
