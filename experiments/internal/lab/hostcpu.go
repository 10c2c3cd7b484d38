package lab

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc/stat's times: USER_HZ, 100 on every Linux
// architecture memcgd runs on (include/asm-generic/param.h).
const userHZ = 100

// HostCPU is the CPU time every CPU of the host has spent busy since boot:
// /proc/stat's cpu line, all but idle and iowait (fs/proc/stat.c,
// show_stat). Its rise over a run is the host's CPU cost of the run,
// the writer's, the flushers', the daemon's and the kernel's work alike.
func HostCPU() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("host CPU: %w", err)
	}
	return parseHostCPU(string(b))
}

// parseHostCPU takes the busy time from a /proc/stat: user, nice, system,
// irq, softirq and steal of the cpu line (guest time is within user).
func parseHostCPU(stat string) (time.Duration, error) {
	for _, line := range strings.Split(stat, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != "cpu" {
			continue
		}
		var ticks uint64
		for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system irq softirq steal
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/stat cpu field %d: %q: %w", i, f[i], err)
			}
			ticks += v
		}
		return time.Duration(ticks) * time.Second / userHZ, nil
	}
	return 0, fmt.Errorf("/proc/stat: no cpu line with 8 times")
}
