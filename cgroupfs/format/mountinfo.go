package format

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Mount is one line of /proc/PID/mountinfo (fs/proc_namespace.c,
// show_mountinfo):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//	(1)(2)(3)   (4)   (5)      (6)      (7)   (8) (9)    (10)         (11)
type Mount struct {
	// ID and ParentID are the mount's and its parent's mount IDs (1, 2).
	ID, ParentID int
	// Major and Minor are the device number of the mounted filesystem
	// (3), st_dev of its files on most filesystems (btrfs subvolumes
	// differ).
	Major, Minor uint32
	// Root is the directory of the filesystem mounted here (4); for a
	// cgroup mount, the cgroup at the mount point.
	Root string
	// MountPoint is where it is mounted, relative to the reader's root (5).
	MountPoint string
	// Options are the per-mount options (6), such as rw and relatime.
	Options []string
	// FSType is the filesystem type (9), such as cgroup or cgroup2.
	FSType string
	// Source is the mount source (10), "none" when there is none.
	Source string
	// SuperOptions are the per-superblock options (11); for a v1 cgroup
	// mount they name its controllers.
	SuperOptions []string
}

// ParseMountInfo parses /proc/PID/mountinfo. Paths are unescaped: the kernel
// prints space, tab, newline and backslash as \ooo octal (fs/seq_file.c,
// mangle_path).
func ParseMountInfo(r io.Reader) ([]Mount, error) {
	var mounts []Mount
	sc := bufio.NewScanner(r)
	// A line holds two paths of up to PATH_MAX each, four times as long
	// once escaped, and the options.
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for n := 1; sc.Scan(); n++ {
		m, err := parseMountLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d %q: %w", n, sc.Text(), err)
		}
		mounts = append(mounts, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return mounts, nil
}

func parseMountLine(line string) (Mount, error) {
	// Fields are separated by exactly one space; splitting on runs of
	// spaces would lose an empty source.
	f := strings.Split(line, " ")
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if sep < 0 || len(f) != sep+4 {
		return Mount{}, fmt.Errorf("want 6 fields and optional fields, then \"-\" and 3 fields; got %d fields", len(f))
	}
	var m Mount
	var err error
	if m.ID, err = strconv.Atoi(f[0]); err != nil {
		return Mount{}, fmt.Errorf("mount ID %q: want a decimal number", f[0])
	}
	if m.ParentID, err = strconv.Atoi(f[1]); err != nil {
		return Mount{}, fmt.Errorf("parent ID %q: want a decimal number", f[1])
	}
	maj, min, ok := strings.Cut(f[2], ":")
	ma, err1 := strconv.ParseUint(maj, 10, 32)
	mi, err2 := strconv.ParseUint(min, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return Mount{}, fmt.Errorf("device %q: want major:minor in decimal", f[2])
	}
	m.Major, m.Minor = uint32(ma), uint32(mi)
	m.Root = unescapeOctal(f[3])
	m.MountPoint = unescapeOctal(f[4])
	m.Options = strings.Split(f[5], ",")
	m.FSType = unescapeOctal(f[sep+1])
	m.Source = unescapeOctal(f[sep+2])
	m.SuperOptions = strings.Split(f[sep+3], ",")
	return m, nil
}

// unescapeOctal replaces each \ooo (a byte, so \000 to \377) by the byte
// it stands for and leaves any other backslash as it is.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] <= '3' && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
