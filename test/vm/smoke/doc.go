// Package smoke holds tests that run inside the test VM (package vm) and
// check the setup every VM test relies on: the cgroup layout of the chosen
// cgroup version, a TMPDIR on a real ext4 disk, a disk slower than
// memory, and a loopback interface that is up. Outside the VM (MEMCGD_VM
// unset) they skip.
package smoke
