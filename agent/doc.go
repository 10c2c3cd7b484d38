// Package agent is memcgd's daemon loop: the imperative shell around the
// pure policy. It lists and watches the managed cgroups of a host.Host,
// wakes on their events (and a slow safety scan), steps each active
// cgroup's policy.Controller, performs the decisions with bounded
// concurrency, round-robin across cgroups, and keeps the statistics the
// metrics endpoint and `memcgd stat` report.
package agent
