// Package vm runs Go test binaries inside a real Linux kernel under qemu, so
// that code written against cgroupfs is tested on a cgroup v2 kernel (and on
// the same kernel with the cgroup v1 memory controller) whatever the host runs.
//
// A run builds an initramfs holding busybox, the kernel modules for a virtio
// disk with ext4, the test binaries and an /init script (init.sh); makes a
// fresh ext4 disk image whose writes qemu throttles, so the disk is slower than
// memory as in the seeds' experiments; boots the Debian kernel with TCG; and
// reads the results back from the VM's second serial port.
//
// The VM talks to the host over two serial ports. ttyS0 is the kernel console.
// ttyS1 carries only what the jobs print, framed by marker lines:
//
//	@@memcgd-vm ready                      cgroups mounted, jobs start
//	@@memcgd-vm begin <job>
//	... the job's stdout and stderr ...
//	@@memcgd-vm end <job> exit=<status>
//	@@memcgd-vm done                       all jobs ran; the VM powers off
//	@@memcgd-vm error <message>            /init could not set the VM up
//
// Kernel messages never interleave with test output, and a job whose end
// marker is missing (kernel panic, hang, OOM of the VM) is a failure.
//
// The kernels, their modules and busybox come from a cache directory filled
// by scripts/install-deps; see Assets. Two kernels: Debian stable's
// (KernelCurrent), on which TestVM runs the suite, with no cpu controller,
// since memcgd freezes rather than paces there; and Debian unstable's
// (KernelPaced), 6.18 or later, on which TestVMPaced runs the pace tests
// and the tracker's on cgroup v2 with the cpu controller
// (Config.CPUController).
//
// Commands:
//
//	scripts/test-vm                                    # CI: install, then TestVM with CI=true
//	go test ./test/vm -run 'TestVM/cgroup-v1'          # one cgroup version
//	go test ./test/vm -run 'TestVMPaced'               # the pace tests on the paced kernel
//	go run ./test/vm/cmd/vmrun -kernel paced -cpu -pkg ./test/daemon -run Paced
//	go run ./test/vm/cmd/vmrun -cgroup v2 -pkg ./cgroupfs -run TestX
//	go run ./test/vm/cmd/vmrun -cgroup v1 -shell-cmd 'cat /proc/self/cgroup'
//
// To run a package's tests in the VM, add it to SuitePackages; a command its
// tests run as a process goes in SuiteCommands, and is then in the VM's /bin
// (memcgd for test/daemon). Inside the VM, a test sees MEMCGD_VM=1 and
// CI=true, so a real-kernel test that finds no cgroupfs fails rather than
// skips.
package vm
