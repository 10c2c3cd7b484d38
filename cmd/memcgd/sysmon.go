package main

import (
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

// The Go runtime's sysmon thread retakes Ps from goroutines in long
// system calls and preempts long-running ones (runtime/proc.go, sysmon and
// retake). It polls every 20 µs, doubling the interval after 50 polls that
// retook nothing, up to 10 ms. When every P is idle it sleeps until the
// next timer, and the first system call after that wakes it with the
// interval back at 20 µs (entersyscall, entersyscallWakeSysmon). A daemon
// that goes idle and wakes hundreds of times a second, as memcgd does
// while it paces a writer, so keeps sysmon polling every 20 µs: a quarter
// of its thread switches, each dear on a paravirtualised guest. sysmon
// never sleeps that deep while GODEBUG's schedtrace is set (it must print
// on time), so its interval grows to 10 ms and stays there until it
// retakes a P. The runtime reads GODEBUG once, at start: `memcgd run`
// executes itself again with schedtrace at its longest interval, 2^31-1
// ms, at which the runtime prints one line of its scheduler's state to
// stderr when the host's monotonic clock passes a multiple of it (24.8
// days of uptime), and no other.

// sysmonGODEBUG is the GODEBUG setting that keeps sysmon from its deep
// sleep.
const sysmonGODEBUG = "schedtrace=2147483647"

// keepSysmonAwake executes the running binary again, with the same
// arguments, with sysmonGODEBUG added to the GODEBUG of environ, unless
// that sets schedtrace already: then it returns nil, and the operator's
// setting stands. It returns only if it does not execute.
func keepSysmonAwake(environ []string) error {
	env, changed := withSysmonGODEBUG(environ)
	if !changed {
		return nil
	}
	// A SIGHUP ignored stays ignored across execve until the new image
	// asks for it (os/signal): a reload sent now is lost rather than
	// fatal, as at any start before run's signal.Notify.
	signal.Ignore(syscall.SIGHUP)
	err := syscall.Exec("/proc/self/exe", os.Args, env)
	signal.Reset(syscall.SIGHUP)
	return err
}

// withSysmonGODEBUG returns environ with sysmonGODEBUG added to its
// GODEBUG (the first of its GODEBUG entries, the one the runtime reads:
// runtime/env_posix.go, gogetenv), and whether it added it: not if
// GODEBUG sets schedtrace already, to whatever value.
func withSysmonGODEBUG(environ []string) ([]string, bool) {
	at := slices.IndexFunc(environ, func(kv string) bool { return strings.HasPrefix(kv, "GODEBUG=") })
	if at < 0 {
		return append(environ[:len(environ):len(environ)], "GODEBUG="+sysmonGODEBUG), true
	}
	val := strings.TrimPrefix(environ[at], "GODEBUG=")
	for setting := range strings.SplitSeq(val, ",") {
		if k, _, _ := strings.Cut(setting, "="); k == "schedtrace" {
			return environ, false
		}
	}
	if val != "" {
		val += ","
	}
	out := append([]string(nil), environ...)
	out[at] = "GODEBUG=" + val + sysmonGODEBUG
	return out, true
}
