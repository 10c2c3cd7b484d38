// Package agent is memcgd's daemon: the executor of a sched.Core, the
// scheduler, on the real kernel. The Core decides what to do when; the
// agent carries its ops out on a host.Host, feeds it the results, the
// watcher's reports, new and removed cgroups and the time, and publishes
// the statuses the control socket and the metrics read.
//
// # Goroutines and ownership
//
//   - The loop (Run) owns the Core and the executor's record of the ops in
//     flight. It alone calls the Core: it takes a Ready, hands the ops to
//     the lanes' workers, and waits for a result, a report, a request or
//     the Core's deadline.
//   - Each lane (sched.Lane) has as many workers as the Core's capacity
//     for it, each owning only the op it carries out; the lanes' channels
//     and the results channel are as deep as their workers, so handing an
//     op out never blocks the loop and a worker never blocks on a loop
//     that has stopped.
//   - Other goroutines (the control socket, SIGHUP, the metrics) reach the
//     loop through Agent.requests, and read Agent.status, a copy of the
//     Core's statuses the loop keeps under Agent.mu.
//
// Lock order: Agent.mu is a leaf; nothing else is locked under it, and it
// is never held across a host call or a channel operation.
package agent
