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
	// writes and writeTime are the write requests completed and the sum of
	// their times from allocation (which comes before the I/O scheduler)
	// to completion; queue is time_in_queue, the requests in flight
	// integrated over time; flushes and flushTime the same for cache
	// flushes, which kernels before 5.5 do not count (hasFlush false).
	writes, flushes           uint64
	writeTime, queue, flushed time.Duration
	hasFlush, ok              bool
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
	// Writes is the write requests completed, WriteTime the sum of their
	// times in the block layer (queued and on the device), QueueTime the
	// requests in flight integrated over time.
	Writes               uint64
	WriteTime, QueueTime time.Duration
	// Flushes and FlushTime are the same for cache flushes; HasFlush is
	// false when the kernel does not count them.
	Flushes   uint64
	FlushTime time.Duration
	HasFlush  bool
	// OK is false when either mark could not be read.
	OK bool
}

// WriteLatencyMs is the mean time of a write request in the block layer,
// from its allocation to its completion, in milliseconds; NaN when not OK
// or no write completed.
func (a DiskActivity) WriteLatencyMs() float64 {
	if !a.OK || a.Writes == 0 {
		return math.NaN()
	}
	return float64(a.WriteTime) / float64(a.Writes) / float64(time.Millisecond)
}

// FlushLatencyMs is the mean time of a cache flush in milliseconds; NaN
// when not OK, not counted, or none completed.
func (a DiskActivity) FlushLatencyMs() float64 {
	if !a.OK || !a.HasFlush || a.Flushes == 0 {
		return math.NaN()
	}
	return float64(a.FlushTime) / float64(a.Flushes) / float64(time.Millisecond)
}

// MeanInFlight is the mean number of requests in flight (queued in the
// block layer or on the device) over the interval; NaN when not OK.
func (a DiskActivity) MeanInFlight() float64 {
	if !a.OK {
		return math.NaN()
	}
	return float64(a.QueueTime) / float64(a.Wall)
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

// parseDiskStat parses a block device's stat file: eleven or more fields
// (Documentation/block/stat.rst; block/genhd.c part_stat_show), of which
// it reads the 5th, write requests; the 7th, sectors written (512 bytes
// each, whatever the device's sector size); the 8th, write ticks; the 10th,
// io_ticks; the 11th, time_in_queue; and with 17 or more, the 16th and
// 17th, flush requests and flush ticks. Ticks are milliseconds.
func parseDiskStat(s string) (DiskMark, error) {
	f := strings.Fields(s)
	if len(f) < 11 {
		return DiskMark{}, fmt.Errorf("block device stat: %d fields, want at least 11", len(f))
	}
	var errs []error
	num := func(i int, name string) uint64 {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("block device stat: %s %q: %w", name, f[i], err))
		}
		return n
	}
	ms := func(i int, name string) time.Duration { return time.Duration(num(i, name)) * time.Millisecond }
	m := DiskMark{
		writes:    num(4, "write requests"),
		written:   num(6, "sectors written") * 512,
		writeTime: ms(7, "write ticks"),
		busy:      ms(9, "io_ticks"),
		queue:     ms(10, "time_in_queue"),
		ok:        true,
	}
	if len(f) >= 17 {
		m.flushes, m.flushed, m.hasFlush = num(15, "flush requests"), ms(16, "flush ticks"), true
	}
	if len(errs) > 0 {
		return DiskMark{}, errs[0]
	}
	return m, nil
}

// Sub is the device's activity from m0 to m.
func (m DiskMark) Sub(m0 DiskMark) DiskActivity {
	wall := m.at.Sub(m0.at)
	if !m.ok || !m0.ok || wall <= 0 {
		return DiskActivity{}
	}
	return DiskActivity{
		Busy:      min(float64(m.busy-m0.busy)/float64(wall), 1),
		Written:   m.written - m0.written,
		Wall:      wall,
		Writes:    m.writes - m0.writes,
		WriteTime: m.writeTime - m0.writeTime,
		QueueTime: m.queue - m0.queue,
		Flushes:   m.flushes - m0.flushes,
		FlushTime: m.flushed - m0.flushed,
		HasFlush:  m.hasFlush && m0.hasFlush,
		OK:        true,
	}
}
