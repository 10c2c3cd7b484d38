// Package agent is memcgd's daemon loop: the imperative shell around the
// pure policy. It lists and watches the managed cgroups of a host.Host,
// wakes on their events (and a slow safety scan), steps each cgroup's
// policy.Controller, carries out the decisions with bounded concurrency,
// round-robin across cgroups (throttled ones first), and keeps the
// statistics the metrics endpoint and `memcgd stat` report.
//
// As in raft's Ready, a policy.Decision holds everything the agent does for
// a cgroup, timing included: it writes out, flushes, reclaims and works the
// freezer as told, steps the cgroup again when NextLook passes (on its
// Clock), arms the watcher's thresholds (Wake), and keeps the throttle's
// deadlines (HoldFor, RunFor) by a timer of the cgroup's own. It decides no
// timing of its own but the slow safety scan, the audit and the reclaim
// backoff.
//
// # Goroutines and locks
//
// The loop (Agent.loop) owns scheduling: the ready queue, the timer heap
// and the loop-owned fields of every cgroupState. Workers step one cgroup
// each; the loop hands a cgroup to one worker at a time, so its
// worker-owned fields need no lock. Open-loop pauses, the one full flush
// allowed in flight, and the write-out and reclaim of a cgroup in a
// throttle episode (cgroupState.acting says who runs them) run on
// goroutines of their own and report through channels or the
// mutex-guarded counters.
//
// The closed-loop throttle (throttle.go) keeps each cgroup's open episode
// in cgroupState.thr, under a mutex of its own: the worker stepping the
// cgroup carries out the decision's freezer action under it, and the
// cgroup's deadline timer (HoldFor, RunFor) thaws or refreezes under it
// between steps; each decision bumps its generation, so a timer armed by
// an older decision does nothing. A timer asks the loop for a step through
// Agent.due, never blocking. The loop takes it only to end an episode (a
// forgotten cgroup, shutdown).
//
// Lock order: throttle.mu, then Agent.mu, then Agent.ancMu, then
// inflight.mu. throttle.mu is held across the host's freezer calls (one
// bounded cgroupfs write each, itself taking inflight-free cgroupfs
// locks only); the others are never held across a host call or a channel
// operation. No code holds two of them at once today; the Overrides' own
// lock is taken with none held.
package agent
