// Package sched is memcgd's scheduler as a pure state machine: the part
// of the daemon that decides what to do when, around the policy's
// per-cgroup decisions. It is single-threaded, does no I/O, reads no
// clock and starts no goroutine, in the manner of raft's RawNode: the
// caller passes time in, tells it what happened (Tick, Report,
// CgroupCreated, Kick, Reload, ...), takes the ops it wants carried out
// from Ready, and reports each op's outcome with Advance. The daemon's
// executor (package agent) runs the ops on worker pools against the real
// kernel; the simulator (sim/daemon) runs them against the simulated
// kernel on its clock, so the simulated daemon is the shipped one.
//
// The Core owns everything with a schedule: the ready queue of cgroups to
// step (throttled ones first, then round-robin), the timer heap (each
// cgroup's next look, the throttle's HoldFor and RunFor deadlines, the
// looks after a mkdir, the safety scan and the audit), the throttle
// episodes, the ancestors' readings the steps reuse, and each cgroup's
// policy.Controller and status. It is the one owner of per-cgroup state:
// the driver keeps only resources the ops name (a watch, an episode's
// host.Frozen, which the Core hands back in the ops that need it), and
// drops them when an op says so (End, Forget).
//
// # The contract
//
// Ops of one Lane run in the order Ready hands them out, at most
// Capacity at a time; a driver with that many workers per lane needs no
// queue of its own. Every op is reported once, by Advance, in any order
// across lanes. The Core serialises what must be: one step of a cgroup
// at a time, one freezer op of a cgroup at a time, one action (write-out,
// flush, reclaim) of a cgroup at a time, one full flush on the host.
//
// A step of a cgroup is an Observe op; its result feeds the cgroup's
// controller (policy.Controller.Step), whose decision becomes the
// freezer op first (due now), then the action, then the watch, and the
// cgroup's next look and throttle deadlines go on the timer heap. Each
// decision replaces every deadline of the previous one.
//
// Nothing here is safe for concurrent use.
package sched
