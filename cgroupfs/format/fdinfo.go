package format

// FDInfo is /proc/PID/fdinfo/N of an open file (fs/proc/fd.c, seq_show):
//
//	pos:	0
//	flags:	02100002
//	mnt_id:	27
//	ino:	794626
//
// followed, for some kinds of file (eventfd, epoll, inotify, ...), by lines
// of their own, which are ignored.
type FDInfo struct {
	// Pos is the file position.
	Pos uint64
	// Flags are the file's open flags (O_ACCMODE, O_APPEND, ...; printed
	// in octal).
	Flags uint64
	// MntID is the ID of the mount the file was opened through, as in
	// mountinfo's first field (Linux 3.15+).
	MntID uint64
	// Ino is the file's inode number; HasIno is false on kernels before
	// 5.10, which do not print it.
	Ino    uint64
	HasIno bool
}

// ParseFDInfo parses an fdinfo file into fi, which it resets first. The
// pos, flags and mnt_id lines are required.
func ParseFDInfo(b []byte, fi *FDInfo) error {
	*fi = FDInfo{}
	const (
		seenPos = 1 << iota
		seenFlags
		seenMnt
	)
	seen := 0
	for n := 1; len(b) > 0; n++ {
		var line []byte
		line, b = nextLine(b)
		key, value, ok := colonValue(line)
		if !ok {
			continue // a line of a particular kind of file
		}
		var err error
		switch string(key) {
		case "pos":
			fi.Pos, err = parseUint(value)
			seen |= seenPos
		case "flags":
			fi.Flags, err = parseOctal(value)
			seen |= seenFlags
		case "mnt_id":
			fi.MntID, err = parseUint(value)
			seen |= seenMnt
		case "ino":
			fi.Ino, err = parseUint(value)
			fi.HasIno = true
		default:
			continue
		}
		if err != nil {
			return lineError("fdinfo", n, line, `"`+string(key)+`:\t<number>"`)
		}
	}
	if seen != seenPos|seenFlags|seenMnt {
		return errFDInfoFields
	}
	return nil
}

// colonValue splits a "key:<spaces or tabs>value" line, as fdinfo,
// /proc/PID/io and /proc/meminfo print them.
func colonValue(line []byte) (key, value []byte, ok bool) {
	for i, c := range line {
		if c == ':' {
			if i == 0 {
				return nil, nil, false
			}
			v := line[i+1:]
			for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
				v = v[1:]
			}
			return line[:i], v, true
		}
		if c == ' ' || c == '\t' {
			return nil, nil, false
		}
	}
	return nil, nil, false
}

// parseOctal parses octal digits.
func parseOctal(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, errEmpty
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '7' {
			return 0, errNotDigit
		}
		if v > (1<<64-1)>>3 {
			return 0, errOverflow
		}
		v = v<<3 | uint64(c-'0')
	}
	return v, nil
}
