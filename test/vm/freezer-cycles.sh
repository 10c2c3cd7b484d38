# freezer-cycles.sh is a shell job for the v1 test VM (busybox sh) that
# freezes and thaws a writer the way memcgd's throttle does, without
# memcgd: each round starts dd in a new memory-only cgroup, moves it into a
# new v1 freezer cgroup, freezes and thaws it CYCLES times (3 ms frozen,
# 5 ms thawed), then kills it and removes both cgroups. With ANCHOR=1 an
# empty freezer cgroup is held frozen throughout, as memcgd's freezer
# anchor is (docs/freezer.md). On a kernel that livelocks, the VM's
# soft-lockup watchdog ends the run.
#
#   go run ./test/vm/cmd/vmrun -cgroup v1 -timeout 10m [-env ANCHOR=1] [-env ROUNDS=40] [-env CYCLES=100] \
#       -shell-cmd "$(cat test/vm/freezer-cycles.sh)"
F=/sys/fs/cgroup/freezer
M=/sys/fs/cgroup/memory
if [ "${ANCHOR:-0}" = 1 ]; then
	mkdir $F/anchor
	echo FROZEN >$F/anchor/freezer.state
	echo "anchor $(cat $F/anchor/freezer.state)"
fi
i=0
while [ $i -lt "${ROUNDS:-40}" ]; do
	i=$((i + 1))
	mkdir $M/t$i
	echo 64M >$M/t$i/memory.limit_in_bytes
	sh -c "echo \$\$ > $M/t$i/cgroup.procs; exec dd if=/dev/zero of=/mnt/f$i bs=1M count=100000 2>/dev/null" &
	pid=$!
	sleep 0.05
	mkdir $F/t$i
	echo $pid >$F/t$i/cgroup.procs
	j=0
	while [ $j -lt "${CYCLES:-100}" ]; do
		j=$((j + 1))
		echo FROZEN >$F/t$i/freezer.state
		usleep 3000
		echo THAWED >$F/t$i/freezer.state
		usleep 5000
	done
	kill $pid
	wait $pid 2>/dev/null
	rm -f /mnt/f$i
	rmdir $F/t$i $M/t$i
	echo "round $i ok $(cut -d' ' -f1 /proc/uptime)"
done
if [ "${ANCHOR:-0}" = 1 ]; then
	echo THAWED >$F/anchor/freezer.state
	rmdir $F/anchor
fi
echo done
