// Package daemon tests `memcgd run` as a process on the real kernel: the
// seeds' statements as the daemon delivers them (seed 004's write-out past
// dirty_background, seed 001's background reclaim), its promise that a
// crash or SIGTERM leaves no lowered limit and no frozen cgroup behind,
// config reloads, runtime overrides over the control socket, cgroups that
// vanish under it, a pod's cgroup namespace and a manage.under that does
// not exist, and its idle overhead over thousands of cgroups.
//
// Each test builds its cgroups with cgrouptest beneath the test process's
// own memory cgroup and runs the daemon with manage.under set to the test's
// parent cgroup, its journal, overrides and control socket in a temporary
// directory and its metrics on a free loopback port, so that the daemon
// touches nothing else. The daemon binary is built once per run with
// `go build ./cmd/memcgd`; inside the test VM (test/vm), which has no Go
// toolchain, it is the /bin/memcgd that test/vm ships.
//
//	go test ./test/daemon                              # as root, on the host
//	go run ./test/vm/cmd/vmrun -cgroup v2 -pkg ./test/daemon
//	MEMCGD_OVERHEAD=1 go test ./test/daemon -run TestOverhead -v -timeout 30m
package daemon
