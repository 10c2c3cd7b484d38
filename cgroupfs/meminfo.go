package cgroupfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
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
	var m memInfo
	var seen int
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 {
			continue
		}
		var dst *uint64
		switch string(f[0]) {
		case "MemTotal:":
			dst = &m.Total
		case "MemFree:":
			dst = &m.Free
		default:
			continue
		}
		kb, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil {
			return memInfo{}, fmt.Errorf("parse %s: %s: %w", path, f[0], err)
		}
		*dst = kb << 10
		seen++
	}
	if seen < 2 {
		return memInfo{}, fmt.Errorf("parse %s: MemTotal or MemFree missing", path)
	}
	return m, nil
}
