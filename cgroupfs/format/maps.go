package format

// Mapping is one line of /proc/PID/maps (fs/proc/task_mmu.c,
// show_map_vma):
//
//	7fdb5eed1000-7fdb5efd1000 rw-s 00000000 fe:00 794626    /var/tmp/f
//	(address)                 perms offset  dev   inode     [path]
type Mapping struct {
	// Start and End are the mapping's address range.
	Start, End uint64
	// Read, Write, Exec and Shared are the perms column: "rwxs", with
	// "p" for a private mapping and "-" for a missing permission.
	Read, Write, Exec, Shared bool
	// Offset is the offset into the file.
	Offset uint64
	// Major and Minor are the device number of the file's filesystem
	// (its superblock's s_dev), Inode its inode; 0 for anonymous memory.
	Major, Minor uint32
	Inode        uint64
}

// ParseMaps calls fn for each line of /proc/PID/maps, in order. The path
// column is not parsed: it is ambiguous (a file name may hold spaces and
// " (deleted)"); /proc/PID/map_files reaches the file instead.
func ParseMaps(b []byte, fn func(Mapping)) error {
	for n := 1; len(b) > 0; n++ {
		var line []byte
		line, b = nextLine(b)
		m, ok := parseMapsLine(line)
		if !ok {
			return lineError("maps", n, line, `"start-end perms offset major:minor inode [path]" in hexadecimal but the inode`)
		}
		fn(m)
	}
	return nil
}

func parseMapsLine(line []byte) (Mapping, bool) {
	var m Mapping
	var f [5][]byte
	rest := line
	for i := range f {
		j := 0
		for j < len(rest) && rest[j] != ' ' {
			j++
		}
		if j == 0 {
			return m, false
		}
		f[i] = rest[:j]
		rest = rest[j:]
		if len(rest) > 0 {
			rest = rest[1:]
		} else if i < len(f)-1 {
			return m, false
		}
	}
	start, end, ok := cut(f[0], '-')
	if !ok || len(f[1]) != 4 {
		return m, false
	}
	major, minor, ok := cut(f[3], ':')
	if !ok {
		return m, false
	}
	var err error
	var ma, mi uint64
	if m.Start, err = parseHex(start); err != nil {
		return m, false
	}
	if m.End, err = parseHex(end); err != nil {
		return m, false
	}
	if m.Offset, err = parseHex(f[2]); err != nil {
		return m, false
	}
	if ma, err = parseHex(major); err != nil || ma > 1<<32-1 {
		return m, false
	}
	if mi, err = parseHex(minor); err != nil || mi > 1<<32-1 {
		return m, false
	}
	if m.Inode, err = parseUint(f[4]); err != nil {
		return m, false
	}
	m.Major, m.Minor = uint32(ma), uint32(mi)
	p := f[1]
	m.Read, m.Write, m.Exec = p[0] == 'r', p[1] == 'w', p[2] == 'x'
	m.Shared = p[3] == 's'
	for i, want := range [4]string{"r-", "w-", "x-", "sp"} {
		if p[i] != want[0] && p[i] != want[1] {
			return m, false
		}
	}
	return m, true
}

func cut(b []byte, sep byte) (before, after []byte, ok bool) {
	for i, c := range b {
		if c == sep {
			return b[:i], b[i+1:], true
		}
	}
	return b, nil, false
}

// parseHex parses lowercase hexadecimal digits, as the kernel prints them.
func parseHex(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, errEmpty
	}
	var v uint64
	for _, c := range b {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		default:
			return 0, errNotDigit
		}
		if v > (1<<64-1)>>4 {
			return 0, errOverflow
		}
		v = v<<4 | uint64(d)
	}
	return v, nil
}
