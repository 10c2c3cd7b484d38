// Package lab is the bench on which the seeds' experiments run against the
// real kernel: throw-away memory cgroups beneath the experiment's own
// (mirrored in the unified hierarchy for PSI and cgroup.freeze, and in the
// v1 freezer), processes started inside them, a memcgd daemon run as a
// subprocess and read through its /metrics endpoint, samplers of cgroup
// state, and markdown tables.
//
// It is the non-test counterpart of cgroupfs/cgrouptest, which needs a
// testing.TB: the experiments are plain programs that must also clean up
// after an error or an interrupt. Everything a Lab creates is removed by
// Lab.Close, which the programs defer; it never writes to a cgroup it did
// not create.
package lab
