package overrides

import (
	"os"
	"syscall"
)

// inode is the inode number of a stat result from os.Stat on Linux.
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
