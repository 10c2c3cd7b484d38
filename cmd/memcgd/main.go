// Command memcgd gives every memory cgroup what three unmerged kernel patch
// sets tried to: per-cgroup dirty limits, background reclaim between
// watermarks, and reclaim that writes back the cgroup's own files first.
package main

import (
	"context"
	"os"
)

//go:generate go run . __gendocs ../../docs/man

func main() {
	os.Exit(execute(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
