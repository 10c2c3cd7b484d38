package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The journal is the pacer's undo log: every change to a cgroup that is
// not the pacer's own throw-away pace group is written and synced before
// it is made, so that after a SIGKILL of the pacer Undo can take it back.
// The pace group itself is journalled as a mkdir: undoing it moves every
// thread found in it (the ones the pacer moved, and any they forked or
// cloned meanwhile, which start in their parent's cgroup) back to the
// tenant's cgroup and removes it. Undo is idempotent: a record whose
// change was never made, or was undone already, undoes to nothing.

// Journal operations.
const (
	opMkdir  = "mkdir"  // Dir was made beneath Parent; threads move through Threads
	opEnable = "enable" // +Controller was written to Parent's cgroup.subtree_control
	opWrite  = "write"  // File held Old; New was written to it
)

// record is one journalled change.
type record struct {
	Op string `json:"op"`
	// Parent is the tenant's cgroup directory the change is in or
	// beneath, and Ino its inode when journalled: Undo touches it only
	// while it is the same cgroup (a cgroup removed and made again at
	// the same path has another inode).
	Parent string `json:"parent"`
	Ino    uint64 `json:"ino"`
	// Dir and Threads are opMkdir's: the pace group and the name of the
	// file that takes thread IDs (tasks on v1, cgroup.threads on v2).
	Dir     string `json:"dir,omitempty"`
	Threads string `json:"threads,omitempty"`
	// Controller is opEnable's.
	Controller string `json:"controller,omitempty"`
	// File, Old and New are opWrite's.
	File string `json:"file,omitempty"`
	Old  string `json:"old,omitempty"`
	New  string `json:"new,omitempty"`
}

// Journal appends records to a file, syncing each.
type Journal struct {
	f *os.File
}

// OpenJournal creates or truncates the journal at path.
func OpenJournal(path string) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	return &Journal{f: f}, nil
}

// Record appends r and syncs it; nil Journals record nothing.
func (j *Journal) Record(r record) error {
	if j == nil {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("journal %s: %w", j.f.Name(), err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal %s: %w", j.f.Name(), err)
	}
	return nil
}

// Clear empties the journal once everything it holds was undone.
func (j *Journal) Clear() error {
	if j == nil {
		return nil
	}
	if err := j.f.Truncate(0); err != nil {
		return fmt.Errorf("journal %s: %w", j.f.Name(), err)
	}
	if _, err := j.f.Seek(0, 0); err != nil {
		return fmt.Errorf("journal %s: %w", j.f.Name(), err)
	}
	return j.f.Sync()
}

// Close closes the journal's file.
func (j *Journal) Close() error {
	if j == nil {
		return nil
	}
	return j.f.Close()
}

// readJournal reads the records at path; a torn last line (a crash in
// the middle of a write) is ignored, since its change was not made yet.
func readJournal(path string) ([]record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	var recs []record
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			break
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// Undo takes back what the journal at path records, latest first, and
// returns what it did, one line per record.
func Undo(path string) ([]string, error) {
	recs, err := readJournal(path)
	if err != nil {
		return nil, err
	}
	var did []string
	var errs []error
	for i := len(recs) - 1; i >= 0; i-- {
		s, err := undo(recs[i])
		did = append(did, s)
		errs = append(errs, err)
	}
	return did, errors.Join(errs...)
}

func undo(r record) (string, error) {
	if ino, err := inode(r.Parent); err != nil || ino != r.Ino {
		return fmt.Sprintf("%s %s: %s is gone or another cgroup: left alone", r.Op, r.Parent, r.Parent), nil
	}
	switch r.Op {
	case opMkdir:
		if _, err := os.Stat(r.Dir); errors.Is(err, os.ErrNotExist) {
			return "mkdir: " + r.Dir + " absent", nil
		}
		n, err := drain(r.Dir, r.Parent, r.Threads)
		if err != nil {
			return "", err
		}
		if err := rmdirCgroup(r.Dir); err != nil {
			return "", err
		}
		return fmt.Sprintf("mkdir: moved %d threads back, removed %s", n, filepath.Base(r.Dir)), nil
	case opEnable:
		on, err := enabled(r.Parent, r.Controller)
		if err != nil || !on {
			return "enable: " + r.Controller + " not enabled", err
		}
		if err := writeFile(filepath.Join(r.Parent, "cgroup.subtree_control"), "-"+r.Controller); err != nil {
			return "", err
		}
		return "enable: wrote -" + r.Controller, nil
	case opWrite:
		cur, err := readTrim(r.File)
		if err != nil {
			return "", err
		}
		if cur != r.New {
			return fmt.Sprintf("write: %s holds %q, not ours %q: left alone", filepath.Base(r.File), cur, r.New), nil
		}
		if err := writeFile(r.File, r.Old); err != nil {
			return "", err
		}
		return fmt.Sprintf("write: %s restored to %q", filepath.Base(r.File), r.Old), nil
	}
	return "", fmt.Errorf("journal record op %q: want mkdir, enable or write", r.Op)
}

// drain moves every thread in dir to parent, through the file threads,
// until none is left (a thread may clone or fork while it is moved), and
// returns how many it moved.
func drain(dir, parent, threads string) (int, error) {
	moved := 0
	for round := 0; ; round++ {
		tids, err := readIDs(filepath.Join(dir, threads))
		if err != nil {
			return moved, err
		}
		if len(tids) == 0 {
			return moved, nil
		}
		if round == 100 {
			return moved, fmt.Errorf("drain %s: threads %v still there after 100 rounds", dir, tids)
		}
		for _, tid := range tids {
			err := writeFile(filepath.Join(parent, threads), fmt.Sprint(tid))
			if err != nil && !errors.Is(err, syscall.ESRCH) {
				return moved, err
			}
			moved++
		}
	}
}

// rmdirCgroup removes an empty cgroup, waiting out the EBUSY of tasks that
// are leaving it (an exiting task stays listed a moment).
func rmdirCgroup(dir string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("rmdir %s: %w", dir, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func inode(dir string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// enabled reports whether dir's cgroup.subtree_control lists c.
func enabled(dir, c string) (bool, error) {
	s, err := readTrim(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return false, err
	}
	for _, f := range strings.Fields(s) {
		if f == c {
			return true, nil
		}
	}
	return false, nil
}
