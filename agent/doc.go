// Package agent is memcgd's daemon loop: the imperative shell around the
// pure policy. It lists and watches the managed cgroups of a host.Host,
// wakes on their events (and a slow safety scan), steps each active
// cgroup's policy.Controller, performs the decisions with bounded
// concurrency, round-robin across cgroups, and keeps the statistics the
// metrics endpoint and `memcgd stat` report.
//
// # Goroutines and locks
//
// The loop (Agent.loop) owns scheduling: the ready queue, the timer heap
// and the loop-owned fields of every cgroupState. Workers step one cgroup
// each; the loop hands a cgroup to one worker at a time, so its
// worker-owned fields need no lock. Pauses, and the one full flush allowed
// in flight, run on goroutines of their own and report through channels or
// the mutex-guarded counters.
//
// Lock order: Agent.mu, then Agent.ancMu, then inflight.mu. No code holds
// two of them at once today, and none is held across a host call or a
// channel operation; the Overrides' own lock is taken with none held.
package agent
