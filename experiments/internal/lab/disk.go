package lab

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DiskMark is a reading of the block device the lab's files are on:
// what a throttle must keep busy. Without it a throughput ratio cannot
// tell a throttle that leaves the device idle from a device that is the
// limit.
type DiskMark struct {
	at      time.Time
	written uint64        // bytes
	busy    time.Duration // io_ticks: time with at least one request in flight
	ok      bool
}

// DiskActivity is what the device did between two marks.
type DiskActivity struct {
	// Busy is the share of the interval in which the device had a request
	// in flight, 0 to 1.
	Busy float64
	// Written is the bytes written to the device.
	Written uint64
	// Wall is the interval.
	Wall time.Duration
	// OK is false when either mark could not be read.
	OK bool
}

// BusyPercent is Busy in percent, NaN (printed n/a) when not OK.
func (a DiskActivity) BusyPercent() float64 {
	if !a.OK {
		return math.NaN()
	}
	return a.Busy * 100
}

// WriteMiBps is the write rate in MiB/s, NaN (printed n/a) when not OK.
func (a DiskActivity) WriteMiBps() float64 {
	if !a.OK {
		return math.NaN()
	}
	return MiB(a.Written) / a.Wall.Seconds()
}

// Disk reads the statistics of the block device holding l.Dir. A device
// without them (a directory on a filesystem with no block device) gives a
// mark that is not OK.
func (l *Lab) Disk() DiskMark {
	var st unix.Stat_t
	if err := unix.Stat(l.Dir, &st); err != nil {
		return DiskMark{}
	}
	b, err := os.ReadFile(fmt.Sprintf("/sys/dev/block/%d:%d/stat", unix.Major(st.Dev), unix.Minor(st.Dev)))
	if err != nil {
		return DiskMark{}
	}
	m, err := parseDiskStat(string(b))
	if err != nil {
		return DiskMark{}
	}
	m.at = time.Now()
	return m
}

// parseDiskStat parses a block device's stat file: eleven or more fields,
// the 7th sectors written (512 bytes each, whatever the device's sector
// size) and the 10th io_ticks in milliseconds (Documentation/block/stat.rst;
// block/genhd.c part_stat_show).
func parseDiskStat(s string) (DiskMark, error) {
	f := strings.Fields(s)
	if len(f) < 11 {
		return DiskMark{}, fmt.Errorf("block device stat: %d fields, want at least 11", len(f))
	}
	sectors, err := strconv.ParseUint(f[6], 10, 64)
	if err != nil {
		return DiskMark{}, fmt.Errorf("block device stat: sectors written %q: %w", f[6], err)
	}
	ticks, err := strconv.ParseUint(f[9], 10, 64)
	if err != nil {
		return DiskMark{}, fmt.Errorf("block device stat: io_ticks %q: %w", f[9], err)
	}
	return DiskMark{written: sectors * 512, busy: time.Duration(ticks) * time.Millisecond, ok: true}, nil
}

// Sub is the device's activity from m0 to m.
func (m DiskMark) Sub(m0 DiskMark) DiskActivity {
	wall := m.at.Sub(m0.at)
	if !m.ok || !m0.ok || wall <= 0 {
		return DiskActivity{}
	}
	return DiskActivity{
		Busy:    min(float64(m.busy-m0.busy)/float64(wall), 1),
		Written: m.written - m0.written,
		Wall:    wall,
		OK:      true,
	}
}
