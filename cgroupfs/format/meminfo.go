package format

// MemInfo is the part of /proc/meminfo (fs/proc/meminfo.c,
// meminfo_proc_show) memcgd reads, in bytes.
type MemInfo struct {
	// Total is MemTotal: usable RAM.
	Total uint64
	// Free is MemFree: RAM not used at all.
	Free uint64
	// Available is MemAvailable: an estimate of what can be allocated
	// without swapping (mm/show_mem.c, si_mem_available).
	Available uint64
}

// field returns where the value of key goes.
func (m *MemInfo) field(key []byte) *uint64 {
	switch string(key) {
	case "MemTotal":
		return &m.Total
	case "MemFree":
		return &m.Free
	case "MemAvailable":
		return &m.Available
	}
	return nil
}

// ParseMemInfo parses /proc/meminfo into m, which it resets first. Values
// are printed in kB (KiB); MemTotal and MemFree are required.
func ParseMemInfo(b []byte, m *MemInfo) error {
	*m = MemInfo{}
	const (
		seenTotal = 1 << iota
		seenFree
	)
	seen := 0
	for n := 1; len(b) > 0; n++ {
		var line []byte
		line, b = nextLine(b)
		key, value, ok := colonValue(line)
		if !ok {
			return lineError("meminfo", n, line, `"Key: value"`)
		}
		p := m.field(key)
		if p == nil {
			continue
		}
		kb, ok := cutSuffix(value, " kB")
		if !ok {
			return lineError("meminfo", n, line, `"Key: <decimal> kB"`)
		}
		v, err := parseUint(kb)
		if err != nil || v > (1<<64-1)>>10 {
			return lineError("meminfo", n, line, `"Key: <decimal> kB"`)
		}
		*p = v << 10
		switch p {
		case &m.Total:
			seen |= seenTotal
		case &m.Free:
			seen |= seenFree
		}
	}
	if seen != seenTotal|seenFree {
		return errMemInfoFields
	}
	return nil
}

func cutSuffix(b []byte, suffix string) ([]byte, bool) {
	if len(b) < len(suffix) || string(b[len(b)-len(suffix):]) != suffix {
		return b, false
	}
	return b[:len(b)-len(suffix)], true
}
