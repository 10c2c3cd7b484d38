package format

import (
	"bytes"
	"strconv"
)

// Lock is one line of /proc/locks (fs/locks.c, lock_get_status):
//
//	5: FLOCK  ADVISORY  WRITE 12965 fe:00:5310748 0 EOF
//	5: -> FLOCK  ADVISORY  WRITE 13533 fe:00:5310748 0 EOF
//	(id) [->] class mode      type  pid  major:minor:inode start end
//
// A line with "->" is a request blocked on the lock of the line above it.
type Lock struct {
	// ID numbers the lock; its blocked requests share it.
	ID uint64
	// Blocked: a request waiting for lock ID, not a lock held.
	Blocked bool
	// Class is FLOCK (flock(2)), POSIX (fcntl F_SETLK), OFDLCK (fcntl
	// F_OFD_SETLK), ACCESS, LEASE, DELEG or UNKNOWN.
	Class string
	// Write is true for a WRITE (exclusive) lock, false for READ or UNLCK.
	Write bool
	// PID is the holder's process in the reader's pid namespace; -1 for an
	// OFD lock, which no process owns.
	PID int
	// Major, Minor and Inode name the locked file: its superblock's device
	// (printed in hexadecimal) and inode number. HasInode is false for
	// "<none>:0".
	Major, Minor uint32
	Inode        uint64
	HasInode     bool
}

// ParseLocks calls fn for each line of /proc/locks, in order.
func ParseLocks(b []byte, fn func(Lock)) error {
	for n := 1; len(b) > 0; n++ {
		var line []byte
		line, b = nextLine(b)
		l, ok := parseLocksLine(line)
		if !ok {
			return lineError("locks", n, line, `"id: [->] class mode type pid major:minor:inode start end"`)
		}
		fn(l)
	}
	return nil
}

func parseLocksLine(line []byte) (Lock, bool) {
	var l Lock
	f := bytes.Fields(line)
	if len(f) > 1 && string(f[1]) == "->" {
		l.Blocked = true
		f = append(f[:1], f[2:]...)
	}
	if len(f) != 8 || len(f[0]) < 2 || f[0][len(f[0])-1] != ':' {
		return l, false
	}
	var err error
	if l.ID, err = parseUint(f[0][:len(f[0])-1]); err != nil {
		return l, false
	}
	l.Class = string(f[1])
	switch string(f[3]) {
	case "WRITE":
		l.Write = true
	case "READ", "UNLCK":
	default:
		return l, false
	}
	pid, err := strconv.Atoi(string(f[4]))
	if err != nil {
		return l, false
	}
	l.PID = pid
	if string(f[5]) == "<none>:0" {
		return l, true
	}
	major, rest, ok := cut(f[5], ':')
	minor, ino, ok2 := cut(rest, ':')
	if !ok || !ok2 {
		return l, false
	}
	ma, err1 := parseHex(major)
	mi, err2 := parseHex(minor)
	inode, err3 := parseUint(ino)
	if err1 != nil || err2 != nil || err3 != nil || ma > 1<<32-1 || mi > 1<<32-1 {
		return l, false
	}
	l.Major, l.Minor, l.Inode, l.HasInode = uint32(ma), uint32(mi), inode, true
	return l, true
}
