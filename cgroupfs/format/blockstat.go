package format

import (
	"bytes"
	"fmt"
)

// BlockStat is what the daemon reads of a block device's stat file,
// /sys/dev/block/MAJ:MIN/stat (block/genhd.c, part_stat_show;
// Documentation/block/stat.rst): space-separated counters, 11 of them
// before 4.18, 15 with the discard counters, 17 with the flush counters
// from 5.5.
type BlockStat struct {
	// Flushes is the flush requests the device completed: a cache flush
	// each fsync or fdatasync on a device with a volatile write cache
	// asks for (blkdev_issue_flush, REQ_PREFLUSH). HasFlush says the
	// kernel counts them.
	Flushes  uint64
	HasFlush bool
}

// blockStatFlushes is the index of "flush requests completed" among the
// stat file's fields.
const blockStatFlushes = 15

// ParseBlockStat parses a block device's stat file.
func ParseBlockStat(b []byte) (BlockStat, error) {
	f := bytes.Fields(b)
	switch len(f) {
	case 11, 15:
		for i, v := range f {
			if _, err := parseUint(v); err != nil {
				return BlockStat{}, fmt.Errorf("block stat field %d %q: %w", i+1, v, err)
			}
		}
		return BlockStat{}, nil
	case 17:
	default:
		return BlockStat{}, fmt.Errorf("block stat: %d fields, want 11, 15 or 17", len(f))
	}
	var s BlockStat
	for i, v := range f {
		n, err := parseUint(v)
		if err != nil {
			return BlockStat{}, fmt.Errorf("block stat field %d %q: %w", i+1, v, err)
		}
		if i == blockStatFlushes {
			s.Flushes, s.HasFlush = n, true
		}
	}
	return s, nil
}
