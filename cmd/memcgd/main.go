// Command memcgd gives every memory cgroup what three unmerged kernel patch
// sets tried to: per-cgroup dirty limits, background reclaim between
// watermarks, and reclaim that writes back the cgroup's own files first.
package main

import (
	"context"
	"log/slog"
	"os"
)

//go:generate go run . __gendocs ../../docs/man

func main() {
	// Here, not in run: only the binary's own entry may execute itself
	// again (a test calls execute).
	if len(os.Args) > 1 && os.Args[1] == "run" {
		if err := keepSysmonAwake(os.Environ()); err != nil {
			slog.Warn("memcgd run goes on without GODEBUG "+sysmonGODEBUG+": the runtime's sysmon will poll every 20 µs after each idle spell",
				"err", err)
		}
	}
	os.Exit(execute(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
