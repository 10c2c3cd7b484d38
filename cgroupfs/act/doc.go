// Package act holds memcgd's actuators on the real kernel, one file each:
// reclaim (v2 memory.reclaim, the v1 limit squeeze), targeted write-out of
// a cgroup's files (and of the files the eBPF tracker recorded), the
// rate-limited full flush (Flusher), the pacer of a cgroup's dirtying
// threads by CPU bandwidth (Pacer, pace.go), freezer episodes (Freeze,
// and the v1 freezer mirror EnsureFreezer), and the per-task count of
// dirtied bytes (Dirtied). A new actuator goes here as a file of its
// own.
//
// Invariants: every stateful write (a lowered limit, a freeze, a pace
// group) is journalled before it is made (journal.Journal.Apply, or the
// pace group's own record), so that a crash is undone by the next run; every file operation that may block on a tenant's file runs under
// safeio.BoundedIO, and every file of a tenant's task is reopened through
// safeio.CheckedReopen; a reclaim or freeze write is interruptible by its
// caller's context (ctlfile.WriteCtx). Across calls the package keeps
// the Flusher's host-wide rate and the Pacer's last sample of each
// cgroup's threads' write_bytes, which Forget drops.
package act
