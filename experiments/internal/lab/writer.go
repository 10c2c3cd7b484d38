package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
)

// WriterResult is what experiments/writer prints: the bytes it wrote, the
// time its writes took and the time its final fsync took (0 without
// -fsync).
type WriterResult struct {
	Bytes        uint64  `json:"bytes"`
	WriteSeconds float64 `json:"write_seconds"`
	FsyncSeconds float64 `json:"fsync_seconds"`
}

// Throughput is the write phase's rate in bytes per second.
func (r WriterResult) Throughput() float64 { return float64(r.Bytes) / r.WriteSeconds }

// DiskThroughput is the rate including the final fsync, bytes per second.
func (r WriterResult) DiskThroughput() float64 {
	return float64(r.Bytes) / (r.WriteSeconds + r.FsyncSeconds)
}

// Writer describes one run of experiments/writer.
type Writer struct {
	// Bin is the writer binary (Lab.Build("./experiments/writer")).
	Bin string
	// File is the file to create; Size, Chunk and Rate are its flags.
	File              string
	Size, Chunk, Rate uint64
	// Fsync makes it fsync the file at the end.
	Fsync bool
	// Budget, when not 0, makes it pace itself: at most Budget bytes
	// dirty or under writeback (its -budget).
	Budget uint64
}

// Run runs the writer inside c and returns its report and usage.
func (w Writer) Run(ctx context.Context, c *Cgroup) (WriterResult, Usage, error) {
	args := []string{"-file", w.File, "-size", strconv.FormatUint(w.Size, 10),
		"-rate", strconv.FormatUint(w.Rate, 10)}
	if w.Chunk != 0 {
		args = append(args, "-chunk", strconv.FormatUint(w.Chunk, 10))
	}
	if w.Fsync {
		args = append(args, "-fsync")
	}
	if w.Budget != 0 {
		args = append(args, "-budget", strconv.FormatUint(w.Budget, 10))
	}
	out, u, err := Run(c.Command(ctx, w.Bin, args...))
	if err != nil {
		return WriterResult{}, u, fmt.Errorf("writer in %s: %w", c.Path, err)
	}
	var r WriterResult
	if err := json.Unmarshal(out, &r); err != nil {
		return WriterResult{}, u, fmt.Errorf("writer in %s: read its report %q: %w", c.Path, out, err)
	}
	return r, u, nil
}
