package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
)

// WriterResult is what experiments/writer prints: the bytes it wrote, the
// time its writes took and the time its final fsync took (0 without
// -fsync), and, when it read each chunk from a source first (-from, as dd
// does), its calls.
type WriterResult struct {
	Bytes        uint64  `json:"bytes"`
	WriteSeconds float64 `json:"write_seconds"`
	FsyncSeconds float64 `json:"fsync_seconds"`
	// Reads is the read(2)s from the source, ShortReads those that
	// returned less than asked; Writes is the write(2)s to the file,
	// ShortWrites those that wrote less than asked. EINTR counts the
	// calls that failed with it (and were retried).
	Reads       uint64 `json:"reads,omitempty"`
	ShortReads  uint64 `json:"short_reads,omitempty"`
	Writes      uint64 `json:"writes,omitempty"`
	ShortWrites uint64 `json:"short_writes,omitempty"`
	EINTR       uint64 `json:"eintr,omitempty"`
	// FeederShortWrites is the pipe feeder's write(2)s that wrote less
	// than asked (-from pipe).
	FeederShortWrites uint64 `json:"feeder_short_writes,omitempty"`
	// ShortReadsAt are when the first short reads returned, seconds
	// since the writer started (at most MaxShortReadsAt of them).
	ShortReadsAt []float64 `json:"short_reads_at,omitempty"`
}

// MaxShortReadsAt bounds WriterResult.ShortReadsAt.
const MaxShortReadsAt = 32

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
	// From, when not empty, makes it read each chunk from a source first,
	// as dd: "zero" or "pipe" (its -from).
	From string
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
	if w.From != "" {
		args = append(args, "-from", w.From)
	}
	cmd := c.Command(ctx, w.Bin, args...)
	if w.From != "" {
		// The Go runtime preempts a goroutine that ran 10 ms with a
		// signal (SIGURG); one that arrives as the goroutine enters
		// read(2) cuts the read short too. A dd counting the short reads
		// a freezer causes must not count those.
		cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1")
	}
	out, u, err := Run(cmd)
	if err != nil {
		return WriterResult{}, u, fmt.Errorf("writer in %s: %w", c.Path, err)
	}
	var r WriterResult
	if err := json.Unmarshal(out, &r); err != nil {
		return WriterResult{}, u, fmt.Errorf("writer in %s: read its report %q: %w", c.Path, out, err)
	}
	return r, u, nil
}
