package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Journal is the jbd2 journal of the ext4 filesystem under the lab's
// directory: the thread that commits its transactions, and its statistics
// file.
type Journal struct {
	// Dev is the filesystem's device name (as in /sys/fs/ext4/DEV).
	Dev string
	// Pid is the journal's commit thread (jbd2/DEV-8).
	Pid int
	// info is /proc/fs/jbd2/DEV-INO/info.
	info string
}

// Journal finds the journal of the filesystem holding the lab's
// directory. ok is false when there is none: not ext4, or ext4 made
// without a journal, which has no /proc/fs/jbd2 directory.
func (l *Lab) Journal() (j Journal, ok bool, err error) {
	m, err := mountOf(l.Dir)
	if err != nil {
		return Journal{}, false, err
	}
	if m.FSType != "ext4" {
		return Journal{}, false, nil
	}
	j.Dev = filepath.Base(m.Source)
	infos, _ := filepath.Glob(filepath.Join("/proc/fs/jbd2", j.Dev+"-*", "info"))
	if len(infos) == 0 {
		return Journal{}, false, nil
	}
	if len(infos) > 1 {
		return Journal{}, false, fmt.Errorf("journal of %s: %d statistics files /proc/fs/jbd2/%s-*/info, want 1", l.Dir, len(infos), j.Dev)
	}
	j.info = infos[0]
	// The commit thread is named after the journal's directory there,
	// "jbd2/" + j_devname (fs/jbd2/journal.c, jbd2_journal_start_thread).
	comm := "jbd2/" + filepath.Base(filepath.Dir(j.info))
	if j.Pid, err = findKernelThread(comm); err != nil {
		return Journal{}, false, fmt.Errorf("journal of %s: %w", l.Dir, err)
	}
	return j, true, nil
}

// findKernelThread returns the pid of the task whose comm is name
// (truncated as the kernel truncates it, to 15 bytes).
func findKernelThread(name string) (int, error) {
	if len(name) > 15 {
		name = name[:15]
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(b)) == name {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no task named %q", name)
}

// JournalStats are a journal's statistics since the filesystem was
// mounted (fs/jbd2/journal.c, jbd2_seq_info_show).
type JournalStats struct {
	// Transactions is how many transactions were committed, Requested
	// how many of them because someone asked (fsync, fdatasync).
	Transactions, Requested uint64
	// CommitTime is the kernel's running average of a commit's duration
	// (j_average_commit_time, which weighs the last commits most).
	CommitTime time.Duration
}

// Stats reads the journal's statistics.
func (j Journal) Stats() (JournalStats, error) {
	b, err := os.ReadFile(j.info)
	if err != nil {
		return JournalStats{}, fmt.Errorf("journal statistics: %w", err)
	}
	s, err := parseJournalInfo(string(b))
	if err != nil {
		return JournalStats{}, fmt.Errorf("journal statistics %s: %w", j.info, err)
	}
	return s, nil
}

// parseJournalInfo parses /proc/fs/jbd2/DEV-INO/info: a first line
// "N transactions (M requested), each up to B blocks", and, once a
// transaction was committed, "  Tus average transaction commit time".
func parseJournalInfo(s string) (JournalStats, error) {
	var st JournalStats
	lines := strings.Split(s, "\n")
	if _, err := fmt.Sscanf(lines[0], "%d transactions (%d requested)", &st.Transactions, &st.Requested); err != nil {
		return JournalStats{}, fmt.Errorf("first line %q: want \"N transactions (M requested), ...\"", lines[0])
	}
	for _, line := range lines[1:] {
		v, ok := strings.CutSuffix(strings.TrimSpace(line), "us average transaction commit time")
		if !ok {
			continue
		}
		us, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return JournalStats{}, fmt.Errorf("line %q: %q is not a whole number of µs", line, v)
		}
		st.CommitTime = time.Duration(us) * time.Microsecond
	}
	return st, nil
}
