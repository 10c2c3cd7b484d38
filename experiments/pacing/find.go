package main

import (
	"context"
	"fmt"

	"github.com/memcgd/memcgd/experiments/internal/lab"
)

// find checks how a daemon without eBPF can tell the dirtying threads:
// the per-thread write_bytes of /proc/PID/task/TID/io, which the kernel
// adds to when a page is dirtied, in the dirtying task's context
// (mm/page-writeback.c folio_account_dirtied, task_io_account_write) —
// for write(2) and for stores through a shared mapping (the write fault,
// fault_dirty_shared_page) alike — and not when it is written back.
func (e *env) find(ctx context.Context) error {
	tc, err := e.tenantCgroup("find", nil)
	if err != nil {
		return err
	}
	defer tc.remove()
	p, err := tc.start(ctx, tenantConfig{file: e.b.File("find"), src: srcNone, chunk: 1 << 20})
	if err != nil {
		return err
	}
	defer p.close()
	const size = 64 << 20
	type snap struct {
		writer, aux, leader, proc threadIO
		dirty                     uint64
	}
	take := func() (snap, error) {
		var s snap
		var err error
		pid := p.ready.PID
		for _, x := range []struct {
			dst *threadIO
			tid int
		}{{&s.writer, p.ready.Writer}, {&s.aux, p.ready.Aux}, {&s.leader, pid}, {&s.proc, 0}} {
			if *x.dst, err = readThreadIO(pid, x.tid); err != nil {
				return s, err
			}
		}
		st, err := e.b.Observe(tc.mem)
		if err != nil {
			return s, err
		}
		s.dirty = st.Dirty
		return s, nil
	}
	steps := []struct{ what, cmd string }{
		{"the writer thread write(2)s 64 MiB", fmt.Sprintf("write %d", size)},
		{"the aux thread stores into each page of a fresh 64 MiB shared mapping", fmt.Sprintf("mmap %d", size)},
		{"fsync both files (writeback)", "fsync"},
		{"the aux thread stores into the same mapping again, after its writeback", fmt.Sprintf("remap %d", size)},
		{"truncate both files", "truncate"},
	}
	t := lab.Table{Header: []string{"step", "writer write_bytes Δ (MiB)", "aux Δ", "leader Δ", "process Δ", "process cancelled_write_bytes Δ", "writer wchar Δ", "cgroup dirty after (MiB)"}}
	prev, err := take()
	if err != nil {
		return err
	}
	d := func(a, b uint64) string { return fmt.Sprintf("%.1f", lab.MiB(b-a)) }
	for _, s := range steps {
		if err := p.call(s.cmd, nil); err != nil {
			return err
		}
		cur, err := take()
		if err != nil {
			return err
		}
		t.Add(s.what, d(prev.writer.WriteBytes, cur.writer.WriteBytes), d(prev.aux.WriteBytes, cur.aux.WriteBytes),
			d(prev.leader.WriteBytes, cur.leader.WriteBytes), d(prev.proc.WriteBytes, cur.proc.WriteBytes),
			d(prev.proc.CancelledWriteBytes, cur.proc.CancelledWriteBytes), d(prev.writer.WChar, cur.writer.WChar),
			fmt.Sprintf("%.1f", lab.MiB(cur.dirty)))
		prev = cur
	}
	fmt.Printf("### Finding the dirtying threads without eBPF: per-thread write_bytes\n\n"+
		"/proc/%s/task/TID/io of the tenant's threads, read after each step; the cgroup's dirty is memory.stat's.\n\n%s\n", "PID", t.String())
	return nil
}
