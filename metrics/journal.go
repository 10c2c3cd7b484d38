package metrics

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// journalMinFree is the free space below which the journal counts as
// failing: a record is a JSON line of a few hundred bytes, but a
// compaction rewrites every pending record through a temporary file
// (cgroupfs.Journal.compact), and a full disk fails the record, so the
// change it guards is not made.
const journalMinFree = 1 << 20

// WithJournal exports the undo journal at path: memcgd_journal_healthy,
// checked at each scrape (journalProblem), and
// memcgd_journal_pending_changes, pending's count of the changes in force
// that a restart would undo.
func WithJournal(path string, pending func() int) Option {
	return func(r *Registry) error {
		for _, c := range []prometheus.Collector{
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "memcgd_journal_healthy",
				Help: "1 when the undo journal can keep records: its file in place, on a read-write filesystem with 1 MiB free; 0 when it is lost (a crash would leave the changes made since in force) or failing (records fail, so the daemon makes no new change).",
			}, func() float64 { return boolValue(journalProblem(path, unix.Statfs) == "") }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "memcgd_journal_pending_changes",
				Help: "Stateful changes in force (lowered v1 limits, frozen cgroups) that the journal holds for undo.",
			}, func() float64 { return float64(pending()) }),
		} {
			if err := r.own.Register(c); err != nil {
				return err
			}
		}
		return nil
	}
}

// journalProblem says why the journal at path cannot keep records, "" when
// it can. The daemon appends to the file it opened, so a file deleted or
// replaced under it (a state directory wiped, another volume mounted) is
// lost to the next start's recovery; a read-only or full filesystem fails
// every record, and the change waiting for it is not made. statfs is
// unix.Statfs but in tests. The daemon runs as root, so the blocks
// reserved for root count as free.
func journalProblem(path string, statfs func(string, *unix.Statfs_t) error) string {
	fi, err := os.Lstat(path)
	switch {
	case err != nil:
		return fmt.Sprintf("journal %s: %v", path, err)
	case !fi.Mode().IsRegular():
		return fmt.Sprintf("journal %s: a %v, not a regular file", path, fi.Mode().Type())
	}
	var st unix.Statfs_t
	if err := statfs(filepath.Dir(path), &st); err != nil {
		return fmt.Sprintf("journal %s: statfs: %v", path, err)
	}
	if st.Flags&unix.ST_RDONLY != 0 {
		return fmt.Sprintf("journal %s: read-only filesystem", path)
	}
	if free := st.Bfree * uint64(st.Bsize); free < journalMinFree {
		return fmt.Sprintf("journal %s: %d bytes free, want at least %d", path, free, journalMinFree)
	}
	return ""
}
