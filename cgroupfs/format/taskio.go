package format

// TaskIO is /proc/PID/io (fs/proc/base.c, do_io_accounting;
// Documentation/filesystems/proc.rst, "/proc/<pid>/io"), in bytes and
// system calls.
type TaskIO struct {
	// RChar and WChar are the bytes passed to read and write system
	// calls, whatever their source.
	RChar, WChar uint64
	// SyscR and SyscW count read and write system calls.
	SyscR, SyscW uint64
	// ReadBytes is what the task caused to be read from storage.
	ReadBytes uint64
	// WriteBytes is the page cache the task dirtied, counted when a page
	// is dirtied (mm/page-writeback.c, folio_account_dirtied ->
	// task_io_account_write), not when it reaches the disk.
	WriteBytes uint64
	// CancelledWriteBytes is dirty page cache the task truncated away
	// before write-out.
	CancelledWriteBytes uint64
}

// field returns where the value of key goes.
func (io *TaskIO) field(key []byte) *uint64 {
	switch string(key) {
	case "rchar":
		return &io.RChar
	case "wchar":
		return &io.WChar
	case "syscr":
		return &io.SyscR
	case "syscw":
		return &io.SyscW
	case "read_bytes":
		return &io.ReadBytes
	case "write_bytes":
		return &io.WriteBytes
	case "cancelled_write_bytes":
		return &io.CancelledWriteBytes
	}
	return nil
}

// ParseTaskIO parses /proc/PID/io into io, which it resets first. The
// write_bytes line is required: a kernel without CONFIG_TASK_IO_ACCOUNTING
// prints only the character counts.
func ParseTaskIO(b []byte, io *TaskIO) error {
	*io = TaskIO{}
	hasWriteBytes := false
	for n := 1; len(b) > 0; n++ {
		var line []byte
		line, b = nextLine(b)
		key, value, ok := colonValue(line)
		if !ok {
			return lineError("io", n, line, `"key: value"`)
		}
		p := io.field(key)
		if p == nil {
			continue
		}
		v, err := parseUint(value)
		if err != nil {
			return lineError("io", n, line, `"key: value" with a decimal value`)
		}
		*p = v
		if p == &io.WriteBytes {
			hasWriteBytes = true
		}
	}
	if !hasWriteBytes {
		return errNoWriteBytes
	}
	return nil
}
