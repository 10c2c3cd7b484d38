// Package lab is the bench on which the seeds' experiments run against the
// real kernel: throw-away memory cgroups beneath the experiment's own
// (mirrored in the unified hierarchy for PSI and cgroup.freeze, and in the
// v1 freezer), processes started inside them, a memcgd daemon run as a
// subprocess and read through its /metrics endpoint, samplers of cgroup
// state, and markdown tables. It works on cgroup v1 (a hybrid host) and
// v2; with -vm (vm.go) an experiment runs inside a test VM (test/vm)
// instead of on this machine.
//
// Cgroups are made and removed by internal/sandbox, as the real-kernel
// tests' cgroupfs/cgrouptest does: the experiments are plain programs that
// must also clean up after an error or an interrupt. Everything a Lab
// creates is removed by Lab.Close, which the programs defer; it never
// writes to a cgroup it did not create (but for enabling the memory and io
// controllers for the children of its own, on v2).
package lab
