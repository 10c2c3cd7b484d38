#!/bin/busybox sh
# /init of the memcgd test VM. doc.go describes the marker protocol on ttyS1;
# initramfs.go writes the files read here:
#   /vm/modules  kernel modules to insmod, in order, one per line
#   /vm/jobs     shell lines "job NAME DIR ARGV..." sourced below
# Kernel parameters read here:
#   memcgd.cgroup=v2|v1   cgroup layout to set up
#   memcgd.write_bps=N    qemu's write limit of /dev/vda, passed to the jobs
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

# The results port carries bytes unchanged: raw, so no "\r" is added.
stty -F /dev/ttyS1 raw -echo
exec 3>/dev/ttyS1
mark() { echo "@@memcgd-vm $*" >&3; }
die() {
	mark "error $*"
	poweroff -f
}
param() {
	for w in $(cat /proc/cmdline); do
		case $w in memcgd.$1=*) echo "${w#*=}" ;; esac
	done
}

# The kernel creates lo down: without it nothing listens on or reaches
# 127.0.0.1, where the daemon serves its metrics.
ip link set lo up || die "ip link set lo up failed"

while read -r m; do
	insmod "/lib/modules/$m" || die "insmod $m failed"
done </vm/modules
i=0
while [ ! -b /dev/vda ] && [ $i -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
mount -t ext4 /dev/vda /mnt || die "mount /dev/vda on /mnt failed"

cgroup=$(param cgroup)
case $cgroup in
v2)
	# As systemd mounts it on a cgroup v2 host. Jobs run in the root
	# cgroup, which is exempt from the no-internal-process rule, so tests
	# can create child cgroups with controllers beneath their own.
	mount -t cgroup2 -o nsdelegate,memory_recursiveprot cgroup2 /sys/fs/cgroup ||
		die "mount cgroup2 failed"
	echo "+memory +io" >/sys/fs/cgroup/cgroup.subtree_control ||
		die "enable memory and io controllers failed"
	if [ "$(param cpu)" = 1 ]; then
		echo +cpu >/sys/fs/cgroup/cgroup.subtree_control ||
			die "enable the cpu controller failed"
		# A CPU limit that never binds, held for the whole run: the first
		# limit set turns on the __cfs_bandwidth_used static key and the
		# last one removed turns it off (kernel/sched/fair.c,
		# cfs_bandwidth_usage_inc), and each switch patches kernel text,
		# which under TCG hit an int3 in set_next_task_fair ("Oops: int3")
		# as a pace group came and went, as the freezer's key did on 6.1.
		mkdir /sys/fs/cgroup/memcgd-vm-cpu-anchor &&
			echo "1000000 1000000" >/sys/fs/cgroup/memcgd-vm-cpu-anchor/cpu.max ||
			die "hold a CPU limit failed"
	fi
	jobcg=
	;;
v1)
	# A hybrid host like the development machines: the memory and freezer
	# controllers on v1 hierarchies, an empty unified hierarchy for PSI and
	# cgroup.freeze. Jobs run in a memory cgroup below the root, as
	# processes do there (memory:/process_api/<id>).
	mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup || die "mount tmpfs on /sys/fs/cgroup failed"
	mkdir /sys/fs/cgroup/memory /sys/fs/cgroup/freezer /sys/fs/cgroup/unified
	mount -t cgroup -o memory cgroup /sys/fs/cgroup/memory || die "mount v1 memory failed"
	mount -t cgroup -o freezer cgroup /sys/fs/cgroup/freezer || die "mount v1 freezer failed"
	mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified || die "mount cgroup2 on unified failed"
	jobcg=/sys/fs/cgroup/memory/memcgd-vm
	mkdir $jobcg || die "mkdir $jobcg failed"
	;;
*)
	die "kernel parameter memcgd.cgroup=$cgroup: want v1 or v2"
	;;
esac

export CI=true MEMCGD_VM=1 MEMCGD_VM_CGROUP=$cgroup MEMCGD_VM_WRITE_BPS=$(param write_bps)
export TMPDIR=/mnt/tmp HOME=/root
mkdir -p /root

# job NAME DIR ARGV... runs ARGV in DIR, in the jobs' cgroup, with a fresh
# TMPDIR on the disk and an empty page cache, between begin and end markers.
job() {
	name=$1 dir=$2
	shift 2
	rm -rf /mnt/tmp
	mkdir -p /mnt/tmp
	sync
	echo 3 >/proc/sys/vm/drop_caches
	mark "begin $name"
	sh -c '
		if [ -n "$1" ]; then echo $$ >"$1/cgroup.procs" || exit 125; fi
		cd "$2" || exit 125
		shift 2
		exec "$@"' job "$jobcg" "$dir" "$@" >&3 2>&3 </dev/null
	mark "end $name exit=$?"
}

mark ready
. /vm/jobs
mark done
exec 3>&- # closing the port waits until it has sent everything
sync
umount /mnt
poweroff -f
