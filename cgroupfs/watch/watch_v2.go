package watch

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/format"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// On cgroup v2 a watch holds up to three open files of the cgroup:
//
//   - memory.events.local, polled for EPOLLPRI (a change reported unless
//     Wake.OnlyArmed, as is a PSI event): kernfs wakes pollers on
//     every change of the file (fs/kernfs/file.c, kernfs_notify), which
//     the kernel makes on every low, high, max, oom and oom_kill event of
//     the cgroup (mm/memcontrol.c, memcg_memory_event; rate-limited to one
//     per 10 ms, cgroup_file_notify). The .local file is changed only for
//     the cgroup that hit its own boundary, whereas memory.events is also
//     changed for every ancestor: with every managed cgroup watched, the
//     hierarchical file would report a whole chain for one cgroup's limit.
//     A poll stays ready until the file is read again
//     (kernfs_generic_poll), so the Watcher reads it after each wake-up;
//     that read fails with ENODEV once the cgroup is removed.
//   - memory.pressure with a PSI trigger (WatcherOptions.PSI), opened
//     O_RDWR and kept open, since closing it removes the trigger
//     (kernel/sched/psi.c, psi_trigger_create; Documentation/accounting/
//     psi.rst). Removing the cgroup destroys the trigger and wakes its
//     pollers, after which poll returns EPOLLERR for good
//     (psi_trigger_poll, kernfs_fop_poll): the watch is reported and
//     dropped, which also keeps epoll from returning the file again.
//   - memory.current, when Wake.UsageAbove is set: v2 has no usage
//     thresholds, so the loop reads it with pread(2) into a reused buffer
//     (a seq_file read at offset 0 regenerates the value, fs/seq_file.c
//     seq_read_iter), on the schedule of watch_schedule.go, and reports a
//     crossing upwards; a cgroup already above the threshold when it is
//     set is reported then.
//
// The hierarchy's root has neither memory.events.local nor memory.current
// (mm/memcontrol.c, memory_files[]: CFTYPE_NOT_ON_ROOT), so a watch of the
// root has only the PSI trigger.

// armV2 arms the watch of wt, new, with wake.
func (w *Watcher) armV2(wt *watched, wake host.Wake) error {
	h := w.layout.Memory
	dir := h.Dir(wt.cg)
	if dir == "" {
		return fmt.Errorf("watch %s: outside the mounted subtree %s of %s", wt.cg, h.Root, h.Mount)
	}
	top := string(wt.cg) == h.Root

	fd, err := openV2(wt.cg, dir, "memory.events.local", unix.O_RDONLY)
	switch {
	case top && errors.Is(err, host.ErrVanished):
	case err != nil:
		return err
	default:
		wt.events = fd
		// Read once, so that the poll reports changes from now on.
		if _, err := unix.Pread(fd, w.buf, 0); err != nil {
			unix.Close(fd)
			wt.events = -1
			return watchFileError(wt.cg, dir, "memory.events.local", err)
		}
		if wt.tokens[0], err = w.add(wt, sourceV2Events, fd, unix.EPOLLPRI); err != nil {
			unix.Close(fd)
			wt.events = -1
			return err
		}
	}

	if !w.opts.NoPSI {
		if err := w.armPSI(wt, dir); err != nil {
			return err
		}
	}
	return w.rearmV2(wt, wake)
}

// armPSI arms the PSI trigger of wt. A host without PSI (the psi=0 boot
// option, or cgroup.pressure set to 0) has no memory.pressure file, or
// refuses triggers with EOPNOTSUPP: the watch goes without. A trigger the
// kernel refuses for this process (EPERM or EACCES; EINVAL for a window
// Linux 6.5 and later accept only with CAP_SYS_RESOURCE) degrades this
// cgroup's watch alone: it goes on with memory.events.local and the usage
// poll, PSIRefused counts it and PSIRefusal says why. Failing the Watch
// instead would leave the cgroup unwatched, and, since every cgroup meets
// the same refusal, all of them.
func (w *Watcher) armPSI(wt *watched, dir string) error {
	fd, err := openV2(wt.cg, dir, "memory.pressure", unix.O_RDWR)
	if errors.Is(err, host.ErrVanished) {
		if _, ok := layout.ExistingDir(dir); ok {
			return nil
		}
	}
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		w.refusePSI(err)
		return nil
	}
	if err != nil {
		return err
	}
	trigger := w.opts.PSI.String()
	if _, err := w.writeTrigger(dir, fd, []byte(trigger)); err != nil {
		unix.Close(fd)
		switch {
		case err == unix.EOPNOTSUPP:
			return nil
		case err == unix.EPERM || err == unix.EACCES:
			w.refusePSI(fmt.Errorf("watch %s: write %q to %s/memory.pressure: %w", wt.cg, trigger, dir, err))
			return nil
		case err == unix.EINVAL:
			if _, ok := layout.ExistingDir(dir); !ok {
				return watchFileError(wt.cg, dir, "memory.pressure", unix.ENODEV)
			}
			why := fmt.Errorf("watch %s: write %q to %s/memory.pressure: %w", wt.cg, trigger, dir, err)
			if w.opts.PSI.Window%(2*time.Second) != 0 {
				why = fmt.Errorf("%w (Linux 6.5 and later accept only windows that are multiples of 2s "+
					"from a process without CAP_SYS_RESOURCE)", why)
			}
			w.refusePSI(why)
			return nil
		}
		return watchFileError(wt.cg, dir, "memory.pressure", err)
	}
	if wt.tokens[1], err = w.add(wt, sourceV2PSI, fd, unix.EPOLLPRI); err != nil {
		unix.Close(fd)
		return err
	}
	return nil
}

// refusePSI records that a watch goes without its PSI trigger, and why.
func (w *Watcher) refusePSI(why error) {
	w.psiRefused.Add(1)
	w.psiRefusal = why
}

// rearmV2 sets the usage threshold of wt, opening or closing its
// memory.current as needed. Usage is read now: if it is already above the
// new threshold the cgroup is reported at once, as on v1, and the poll
// reports only a later crossing upwards.
func (w *Watcher) rearmV2(wt *watched, wake host.Wake) error {
	if string(wt.cg) == w.layout.Memory.Root {
		wake.UsageAbove = memcg.NoLimit // no memory.current to poll
	}
	if wake.UsageAbove == memcg.NoLimit {
		if wt.current >= 0 {
			w.closing = append(w.closing, wt.current)
			wt.current = -1
			w.schedule.remove(wt)
		}
		wt.wake, wt.above = wake, false
		return nil
	}
	if wt.current < 0 {
		dir := w.layout.Memory.Dir(wt.cg)
		fd, err := openV2(wt.cg, dir, "memory.current", unix.O_RDONLY)
		if err != nil {
			return err
		}
		wt.current = fd
	}
	now := w.clock()
	usage, err := w.readCurrent(wt)
	if err != nil {
		return err
	}
	wt.wake = wake
	wt.above = w.reportIfOver(wt, usage)
	first, ok := w.schedule.next()
	w.reschedule(wt, now, usage)
	if due, _ := w.schedule.next(); !ok || due < first {
		// The loop sleeps until the first read that was due.
		w.wakeLoop()
	}
	return nil
}

// reschedule folds a read of wt's usage at now into its growth estimate
// and schedules its next read.
func (w *Watcher) reschedule(wt *watched, now time.Duration, usage uint64) {
	w.schedule.set(wt, w.rule.next(&wt.poll, now, usage, wt.wake.UsageAbove))
}

// openV2 opens the file name of cg's directory dir; if it does not exist
// the error wraps host.ErrVanished.
func openV2(cg host.Cgroup, dir, name string, mode int) (int, error) {
	fd, err := unix.Open(filepath.Join(dir, name), mode|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, watchFileError(cg, dir, name, err)
	}
	return fd, nil
}

// watchFileError wraps an error of cg's file name, and host.ErrVanished
// with it when the error says the cgroup is gone.
func watchFileError(cg host.Cgroup, dir, name string, err error) error {
	p := filepath.Join(dir, name)
	if ctlfile.IsVanished(err) {
		return fmt.Errorf("watch %s: %s: %w: %w", cg, p, host.ErrVanished, err)
	}
	return fmt.Errorf("watch %s: %s: %w", cg, p, err)
}

// readCurrent reads wt's memory.current through its open file, into the
// Watcher's buffer: one pread(2), no allocation.
func (w *Watcher) readCurrent(wt *watched) (uint64, error) {
	w.usageReads.Add(1)
	for {
		n, err := unix.Pread(wt.current, w.buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, watchFileError(wt.cg, w.layout.Memory.Dir(wt.cg), "memory.current", err)
		}
		v, err := format.ParseUint(w.buf[:n])
		if err != nil {
			return 0, fmt.Errorf("watch %s: memory.current: %w", wt.cg, err)
		}
		return v, nil
	}
}

// pollBatch is how many usage reads the loop makes per hold of mu: a
// report from the tracker, or a Watch, waits for at most one batch
// (about 64 × 3 µs on real hardware), not for a whole pass.
const pollBatch = 64

// pollDue reads the usage of the polled cgroups that are due, a batch at
// a time, reports those that crossed their threshold upwards since their
// last read, and schedules each one's next read.
func (w *Watcher) pollDue() {
	for {
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return
		}
		now := w.clock()
		n := 0
		for ; n < pollBatch; n++ {
			wt := w.schedule.popDue(now)
			if wt == nil {
				break
			}
			w.pollUsage(wt, now)
		}
		w.unlock()
		if n < pollBatch {
			return
		}
		// Let a goroutine woken by the unlock (a tracker wake-up, a
		// Watch) take mu before the next batch.
		runtime.Gosched()
	}
}

// pollUsage reads wt's usage, taken out of the schedule, at now.
func (w *Watcher) pollUsage(wt *watched, now time.Duration) {
	usage, err := w.readCurrent(wt)
	if err != nil {
		w.gone(wt, err)
		if wt.current >= 0 {
			w.reschedule(wt, now, wt.poll.usage) // not gone: try again later
		}
		return
	}
	above := w.over(usage, wt.wake.UsageAbove)
	if above && !wt.above {
		w.report(wt.cg)
	}
	wt.above = above
	w.reschedule(wt, now, usage)
}

// handleV2Events acts on a change of wt's memory.events.local.
func (w *Watcher) handleV2Events(wt *watched) {
	if _, err := unix.Pread(wt.events, w.buf, 0); err != nil && err != unix.EINTR {
		w.gone(wt, err)
		return
	}
	if !wt.wake.OnlyArmed {
		w.report(wt.cg)
	}
}

// handleV2PSI acts on a poll event of wt's PSI trigger.
func (w *Watcher) handleV2PSI(wt *watched, events uint32) {
	gone := events&(unix.EPOLLERR|unix.EPOLLHUP) != 0
	if gone || !wt.wake.OnlyArmed {
		w.report(wt.cg)
	}
	if gone {
		// The trigger is gone, with the cgroup: poll would return this
		// forever.
		w.drop(wt)
	}
}

// gone reports wt after a failed read and drops its watch when the error
// says the cgroup was removed.
func (w *Watcher) gone(wt *watched, err error) {
	w.report(wt.cg)
	if ctlfile.IsVanished(err) {
		w.drop(wt)
	}
}
