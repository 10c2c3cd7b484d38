package format

import (
	"errors"
	"fmt"
	"math"

	"github.com/memcgd/memcgd/memcg"
)

// v1Unlimited is the smallest value cgroup v1 prints for "no limit".
// memory.limit_in_bytes shows PAGE_COUNTER_MAX * PAGE_SIZE
// (include/linux/page_counter.h: PAGE_COUNTER_MAX = LONG_MAX / PAGE_SIZE;
// mm/memcontrol-v1.c, mem_cgroup_read_u64), which is LONG_MAX rounded down
// to a page: 9223372036854771712 with 4 KiB pages and no less than this
// with pages of up to 64 KiB.
const v1Unlimited = math.MaxInt64 &^ (1<<16 - 1)

var (
	errEmpty    = errors.New("empty")
	errNotDigit = errors.New("not a decimal digit")
	errOverflow = errors.New("out of range for uint64")
)

// ParseUint parses a single-value file such as memory.current,
// memory.usage_in_bytes or memory.failcnt: a decimal number and an
// optional trailing newline.
func ParseUint(b []byte) (uint64, error) {
	b = trimNewline(b)
	v, err := parseUint(b)
	if err != nil {
		return 0, fmt.Errorf("value %q: %w; want a decimal number", string(b), err) // a copy: b stays the caller's
	}
	return v, nil
}

// ParseLimit parses a limit file: v2's memory.max or memory.high ("max" or
// a number of bytes) or v1's memory.limit_in_bytes. Both spellings of "no
// limit", v2's "max" and v1's page-rounded LONG_MAX, become memcg.NoLimit.
func ParseLimit(b []byte) (uint64, error) {
	b = trimNewline(b)
	if string(b) == "max" {
		return memcg.NoLimit, nil
	}
	v, err := parseUint(b)
	if err != nil {
		return 0, fmt.Errorf("limit %q: %w; want \"max\" or a decimal number of bytes", string(b), err) // a copy: b stays the caller's
	}
	if v >= v1Unlimited {
		return memcg.NoLimit, nil
	}
	return v, nil
}

func trimNewline(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		return b[:n-1]
	}
	return b
}

// parseUint parses decimal digits by hand: strconv.ParseUint needs a
// string, and converting the buffer would allocate.
func parseUint(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, errEmpty
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errNotDigit
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, errOverflow
		}
		v = v*10 + d
	}
	return v, nil
}

// Errors of the /proc parsers for a required line that is missing.
var (
	errFDInfoFields  = errors.New("fdinfo: want pos, flags and mnt_id lines")
	errNoWriteBytes  = errors.New("io: no write_bytes line (kernel without CONFIG_TASK_IO_ACCOUNTING?)")
	errMemInfoFields = errors.New("meminfo: want MemTotal and MemFree lines")
)
