// Command memcgd gives every memory cgroup what three unmerged kernel patch
// sets tried to: per-cgroup dirty limits, background reclaim between
// watermarks, and reclaim that writes back the cgroup's own files first.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "memcgd: %v\n", err)
		os.Exit(1)
	}
}
