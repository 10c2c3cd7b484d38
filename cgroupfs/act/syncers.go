package act

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/format"
)

// SyncWindow is how lately a device must have completed a cache flush
// for a write-out to it to yield (Syncers.Syncing): a neighbour that
// fsyncs in a loop flushes every few milliseconds.
const SyncWindow = 100 * time.Millisecond

// syncReadGap is the least time between two reads of one device's stat
// file; a device without one is looked for again after syncRetry.
const (
	syncReadGap = 5 * time.Millisecond
	syncRetry   = time.Second
)

// Syncers tells whether a block device has served cache flushes lately:
// the fsyncs and fdatasyncs of some task, which on a device with a
// volatile write cache ask for a flush (blkdev_issue_flush, REQ_PREFLUSH)
// that completes only once the writes queued before it have. A write-out
// that hands such a device its chunks back to back makes that task wait
// behind them. It reads the device's flush count
// (/sys/dev/block/MAJ:MIN/stat; format.ParseBlockStat) at most every
// syncReadGap. A device with no such file (a filesystem on no block
// device: 0:N), or a kernel before 5.5, which counts no flushes, is never
// syncing. It is safe for concurrent use.
type Syncers struct {
	sysRoot string
	now     func() time.Time
	read    func(path string) ([]byte, error)

	mu   sync.Mutex
	devs map[uint64]*deviceFlushes // guarded by mu
}

// deviceFlushes is what Syncers knows of one device: its flush count at
// readAt, and when it last grew (flushedAt); none says it has no count.
type deviceFlushes struct {
	readAt, flushedAt time.Time
	flushes           uint64
	none              bool
}

// NewSyncers returns Syncers reading the devices' stat files under
// sysRoot (/sys).
func NewSyncers(sysRoot string) *Syncers {
	return &Syncers{sysRoot: sysRoot, now: time.Now, read: os.ReadFile, devs: map[uint64]*deviceFlushes{}}
}

// Syncing reports whether dev (a device number, as st_dev) completed a
// cache flush within SyncWindow.
func (s *Syncers) Syncing(dev uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	d := s.devs[dev]
	switch {
	case d == nil:
		d = &deviceFlushes{}
		s.devs[dev] = d
	case d.none && now.Sub(d.readAt) < syncRetry, !d.none && now.Sub(d.readAt) < syncReadGap:
		return !d.none && now.Sub(d.flushedAt) < SyncWindow
	}
	st, err := s.stat(dev)
	first, last := d.readAt.IsZero() || d.none, d.readAt
	d.readAt, d.none = now, err != nil || !st.HasFlush
	if d.none {
		return false
	}
	// A count that grew since a read within the window grew within it;
	// since an older one, it cannot be told when.
	if !first && st.Flushes != d.flushes && now.Sub(last) < SyncWindow {
		d.flushedAt = now
	}
	d.flushes = st.Flushes
	return now.Sub(d.flushedAt) < SyncWindow
}

// stat reads dev's stat file.
func (s *Syncers) stat(dev uint64) (format.BlockStat, error) {
	p := filepath.Join(s.sysRoot, "dev", "block", fmt.Sprintf("%d:%d", unix.Major(dev), unix.Minor(dev)), "stat")
	b, err := s.read(p)
	if err != nil {
		return format.BlockStat{}, err
	}
	return format.ParseBlockStat(b)
}
