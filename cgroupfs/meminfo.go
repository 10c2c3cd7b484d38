package cgroupfs

import (
	"fmt"
	"os"

	"github.com/memcgd/memcgd/cgroupfs/format"
)

// memInfo is the machine's memory from /proc/meminfo, in bytes.
type memInfo struct {
	Total, Free uint64
}

// readMemInfo reads MemTotal and MemFree (fs/proc/meminfo.c, meminfo_proc_show).
func readMemInfo(procRoot string) (memInfo, error) {
	path := procRoot + "/meminfo"
	b, err := os.ReadFile(path)
	if err != nil {
		return memInfo{}, fmt.Errorf("read %s: %w", path, err)
	}
	var m format.MemInfo
	if err := format.ParseMemInfo(b, &m); err != nil {
		return memInfo{}, fmt.Errorf("parse %s: %w", path, err)
	}
	return memInfo{Total: m.Total, Free: m.Free}, nil
}
