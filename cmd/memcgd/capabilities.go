package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// capability is one capability `memcgd run` uses, and what goes without it.
type capability struct {
	bit  int
	name string
	// without says what does not work when the daemon lacks it.
	without string
}

// capabilities are those deploy/memcgd.service and deploy/daemonset.yaml
// grant, and README.md explains.
var capabilities = []capability{
	{unix.CAP_DAC_OVERRIDE, "CAP_DAC_OVERRIDE", "control files of cgroups delegated to other users cannot be written"},
	{unix.CAP_DAC_READ_SEARCH, "CAP_DAC_READ_SEARCH", "tenants' files cannot be opened for write-out, nor closed files reopened by handle (open_by_handle_at)"},
	{unix.CAP_SYS_PTRACE, "CAP_SYS_PTRACE", "other users' tasks' /proc/PID/fd, io and maps cannot be read: no targeted write-out for them"},
	{unix.CAP_SYS_ADMIN, "CAP_SYS_ADMIN", "shared file mappings (/proc/PID/map_files) are never written out; in a cgroup namespace of its own, memcgd cannot join the host's"},
	{unix.CAP_SYS_RESOURCE, "CAP_SYS_RESOURCE", "PSI triggers with a window that is not a multiple of 2 s are refused (kernel 6.5 and later)"},
	{unix.CAP_BPF, "CAP_BPF", "the eBPF dirty tracker cannot load"},
	{unix.CAP_PERFMON, "CAP_PERFMON", "the eBPF dirty tracker cannot attach to the kernel's tracepoints"},
}

// logMissingCapabilities warns, once at start, of each capability the
// daemon lacks and what goes without it: a unit or pod spec that drops one
// degrades memcgd quietly otherwise.
func logMissingCapabilities(log *slog.Logger, procRoot string) {
	missing, err := missingCapabilities(procRoot)
	if err != nil {
		log.Warn("cannot check capabilities", "err", err)
		return
	}
	for _, c := range missing {
		log.Warn("missing capability", "capability", c.name, "without_it", c.without)
	}
}

// missingCapabilities lists the capabilities of `capabilities` that the
// process does not have in its effective set, read from procRoot/self/status.
func missingCapabilities(procRoot string) ([]capability, error) {
	b, err := os.ReadFile(procRoot + "/self/status")
	if err != nil {
		return nil, fmt.Errorf("read capabilities: %w", err)
	}
	eff, err := capEff(b)
	if err != nil {
		return nil, err
	}
	var out []capability
	for _, c := range capabilities {
		if eff&(1<<c.bit) == 0 {
			out = append(out, c)
		}
	}
	return out, nil
}

// capEff parses the CapEff line of /proc/PID/status (fs/proc/array.c,
// render_cap_t: 16 hex digits).
func capEff(status []byte) (uint64, error) {
	for _, line := range bytes.Split(status, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("CapEff:")); ok {
			v, err := strconv.ParseUint(string(bytes.TrimSpace(rest)), 16, 64)
			if err != nil {
				return 0, fmt.Errorf("CapEff: invalid value %q: want 16 hex digits", bytes.TrimSpace(rest))
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("no CapEff line in /proc/self/status")
}
