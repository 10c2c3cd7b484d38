// Package format parses the text files of the kernel's memory cgroups and
// procfs: memory.stat (v1 and v2), memory.events, pressure stall
// information, single-value files, /proc/PID/mountinfo, /proc/PID/cgroup,
// /proc/PID/fdinfo/N, /proc/PID/io, /proc/meminfo and /proc/locks.
//
// The stat parsers fill a caller-provided struct and allocate nothing in
// steady state, so a daemon can read thousands of cgroups a second without
// feeding the garbage collector. Keys a parser does not know are ignored,
// because every kernel release adds some; a line that does not have the
// shape the kernel prints is an error that names the line.
package format
