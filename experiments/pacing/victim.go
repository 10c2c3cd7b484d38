package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The victim is a neighbour on the same filesystem: this binary
// re-executed with "victim" first, in a cgroup of its own. Like a
// database's log it appends 4 KiB and fdatasyncs, again and again; each
// append grows i_size, so each fdatasync commits a jbd2 transaction
// (fs/ext4/fsync.c ext4_fsync_journal), and a commit waits for every
// handle open in its transaction (fs/jbd2/commit.c, t_updates): a writer
// descheduled inside a handle delays it.
//
// It prints "{}" when ready, waits for a line on stdin, runs for
// -duration and prints victimResult.

// victimResult is the victim's report.
type victimResult struct {
	// Sync is each fdatasync's duration, ns.
	Sync []int64 `json:"sync"`
}

func victimMain(args []string) error {
	fs := flag.NewFlagSet("victim", flag.ContinueOnError)
	file := fs.String("file", "", "file to append to (required)")
	duration := fs.Duration("duration", 5*time.Second, "how long to run")
	bs := fs.Int("bs", 4096, "bytes per append")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return fmt.Errorf("-file: missing: want the path of a file to create")
	}
	fd, err := unix.Open(*file, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_APPEND|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", *file, err)
	}
	defer unix.Close(fd)
	buf := make([]byte, *bs)
	res := victimResult{Sync: make([]int64, 0, 1<<16)}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(struct{}{}); err != nil {
		return err
	}
	if !bufio.NewScanner(os.Stdin).Scan() {
		return fmt.Errorf("victim: no start line")
	}
	end := time.Now().Add(*duration)
	for time.Now().Before(end) {
		if _, err := unix.Write(fd, buf); err != nil {
			return fmt.Errorf("append %s: %w", *file, err)
		}
		t0 := time.Now()
		if err := unix.Fdatasync(fd); err != nil {
			return fmt.Errorf("fdatasync %s: %w", *file, err)
		}
		if len(res.Sync) < cap(res.Sync) {
			res.Sync = append(res.Sync, time.Since(t0).Nanoseconds())
		}
	}
	return enc.Encode(res)
}
