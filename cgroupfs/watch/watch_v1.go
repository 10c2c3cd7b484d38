package watch

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// On cgroup v1 a watch is one eventfd with two registrations made through
// the cgroup's cgroup.event_control, "<eventfd> <fd of the file> <args>"
// (Documentation/admin-guide/cgroup-v1/memory.rst sections 9 and 11;
// mm/memcontrol-v1.c, memcg_write_event_control):
//
//   - a threshold on memory.usage_in_bytes at Wake.UsageAbove, which
//     signals the eventfd whenever usage crosses it, in either direction
//     (mem_cgroup_usage_register_event, __mem_cgroup_threshold; checked
//     every 128 page charges or uncharges per CPU, memcg1_check_events);
//   - memory.pressure_level "low,local", which signals it each time
//     reclaim targeted at this cgroup has scanned another 512 pages
//     (mm/vmpressure.c, vmpressure, vmpressure_win). "low" is the lowest
//     level, so any reclaim counts. "local" keeps out the events of
//     reclaim targeted at descendants: the kernel's default mode,
//     "default" (no passthrough, not "hierarchy" as often said), would
//     also pass up those of unwatched descendants, which this watch
//     could not tell apart from its own (vmpressure_event).
//
// Sharing one eventfd halves the file descriptors a watch holds, so that
// 10,000 watches fit the common hard limit of 20,000 open files. The
// cost is that a signal does not say which registration fired; the
// Watcher reads the cgroup's usage and failcnt to tell:
//
//   - usage at or above the threshold, or, when it was last seen below
//     the threshold, below it by less than the charges the kernel may
//     hold in per-CPU stock (chargeSlack): a crossing upwards (or
//     reclaim while above it); reported. The kernel charges
//     page_counter in batches of MEMCG_CHARGE_BATCH pages per CPU and
//     drains unused stock later (mm/memcontrol.c, consume_stock,
//     refill_stock, drain_stock), so the usage the threshold check saw
//     can exceed the usage read just after. In the v1 VM a crossing of
//     18.44 MiB was signalled with 18.30 MiB read; taken for a crossing
//     downwards, it went unreported, and the kernel, whose threshold was
//     then passed, never signalled again: the writer was seen only at
//     its memory limit, with 77 MiB dirty;
//   - failcnt changed: a charge hit the limit and limit reclaim ran
//     (mm/page_counter.c, page_counter_try_charge counts the failure;
//     try_charge_memcg then reclaims); reported, unless Wake.OnlyArmed,
//     with which vmpressure is not registered at all;
//   - neither: a crossing downwards; not reported. So is reclaim that
//     lowering the limit caused, which the agent itself does.
//
// The kernel signals a threshold only when usage crosses it: registering
// one below the current usage signals nothing
// (mem_cgroup_usage_register_event sets current_threshold from the usage
// at registration). So armV1 reads usage after registering, and reports
// the cgroup at once if it is already at or above the threshold.
//
// Moving the threshold arms a new eventfd before closing the old one, so
// that no crossing falls between the two. Closing an eventfd unregisters
// both of its events (memcg_event_wake on EPOLLHUP, memcg_event_remove).
// When the cgroup is removed, the kernel unregisters its events and
// signals each eventfd once (memcg1_css_offline, memcg_event_remove);
// the read of usage then fails with ENOENT, and the watch is reported
// and dropped. Nothing signals the eventfd again, so a removed cgroup
// cannot make the loop spin.

// armV1 arms (or re-arms, moving the threshold) the watch of wt.
func (w *Watcher) armV1(wt *watched, wake host.Wake) error {
	dir := w.layout.Memory.Dir(wt.cg)
	if dir == "" {
		return fmt.Errorf("watch %s: outside the mounted subtree %s of %s", wt.cg, w.layout.Memory.Root, w.layout.Memory.Mount)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("watch %s: eventfd: %w", wt.cg, err)
	}
	if err := registerV1(dir, efd, wake); err != nil {
		unix.Close(efd)
		if ctlfile.IsVanished(err) {
			return fmt.Errorf("watch %s: %w: %w", wt.cg, host.ErrVanished, err)
		}
		return fmt.Errorf("watch %s: %w", wt.cg, err)
	}
	failcnt, err := w.reader.ReadUint(w.layout.Memory, wt.cg, "memory.failcnt")
	if err != nil {
		unix.Close(efd)
		return fmt.Errorf("watch: %w", err)
	}
	// Read after registering: a crossing from here on signals the
	// eventfd, and usage already above the threshold, which the kernel
	// never signals, is seen here.
	usage, err := w.reader.ReadUint(w.layout.Memory, wt.cg, "memory.usage_in_bytes")
	if err != nil {
		unix.Close(efd)
		return fmt.Errorf("watch: %w", err)
	}
	token, err := w.add(wt, sourceV1Event, efd, unix.EPOLLIN)
	if err != nil {
		unix.Close(efd)
		return err
	}
	if old := wt.tokens[0]; old != 0 {
		w.remove(old)
	}
	wt.tokens[0], wt.efd, wt.failcnt, wt.wake = token, efd, failcnt, wake
	wt.above = w.reportIfOver(wt, usage)
	return nil
}

// registerV1 registers the eventfd efd for the usage threshold of wake, if
// it has one, and for vmpressure unless wake.OnlyArmed, in the v1 memory
// cgroup at dir. The kernel has marked memory.pressure_level deprecated
// (it logs so once); without the file the watch goes on without
// vmpressure. A watch with neither registers nothing: its eventfd is
// never signalled, not even at the cgroup's removal, which the agent,
// looking at the cgroup anyway, finds then.
func registerV1(dir string, efd int, wake host.Wake) error {
	p := filepath.Join(dir, "cgroup.event_control")
	ctl, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	defer unix.Close(ctl)
	if wake.UsageAbove != memcg.NoLimit {
		if err := registerV1Event(ctl, efd, dir, "memory.usage_in_bytes", strconv.FormatUint(wake.UsageAbove, 10)); err != nil {
			return err
		}
	}
	if wake.OnlyArmed {
		return nil
	}
	err = registerV1Event(ctl, efd, dir, "memory.pressure_level", "low,local")
	if errors.Is(err, unix.ENOENT) {
		if _, ok := layout.ExistingDir(dir); ok {
			return nil
		}
	}
	return err
}

// registerV1Event writes one registration to cgroup.event_control (ctl).
// The kernel needs the watched file open only during the write.
func registerV1Event(ctl, efd int, dir, file, args string) error {
	p := filepath.Join(dir, file)
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	defer unix.Close(fd)
	line := strconv.Itoa(efd) + " " + strconv.Itoa(fd) + " " + args
	if _, err := unix.Write(ctl, []byte(line)); err != nil {
		return fmt.Errorf("write %q to %s/cgroup.event_control: %w", line, dir, err)
	}
	return nil
}

// memcgChargeBatch is MEMCG_CHARGE_BATCH (include/linux/memcontrol.h):
// the pages a CPU charges to a memory cgroup's page_counter at once and
// keeps in stock.
const memcgChargeBatch = 64

// chargeSlack is how much more than memory.usage_in_bytes shows the
// kernel may have counted when it checked a v1 threshold: a charge batch
// of stock on every CPU.
func (w *Watcher) chargeSlack() uint64 {
	return memcgChargeBatch * w.pageSize * uint64(runtime.NumCPU())
}

// handleV1 acts on a signal of wt's eventfd.
func (w *Watcher) handleV1(wt *watched) {
	var b [8]byte
	_, _ = unix.Read(wt.efd, b[:]) // reset the counter; EAGAIN if already read
	usage, err := w.reader.ReadUint(w.layout.Memory, wt.cg, "memory.usage_in_bytes")
	if err == nil {
		var failcnt uint64
		failcnt, err = w.reader.ReadUint(w.layout.Memory, wt.cg, "memory.failcnt")
		if err == nil {
			// Below the threshold before this signal, the kernel's
			// check may have counted stock this read no longer shows.
			th := wt.wake.UsageAbove
			up := w.over(usage, th) || !wt.above && w.over(usage+w.chargeSlack(), th)
			if up || failcnt != wt.failcnt && !wt.wake.OnlyArmed {
				w.report(wt.cg)
			}
			wt.above, wt.failcnt = up, failcnt
			return
		}
	}
	// The cgroup is gone, or unreadable: either way the agent must look
	// at it, and a vanished cgroup's watch is released here.
	w.report(wt.cg)
	if errors.Is(err, host.ErrVanished) {
		w.drop(wt)
	}
}
