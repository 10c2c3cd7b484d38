package cgrouptest

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// SkipVMWithoutPacing skips t in a test VM (MEMCGD_VM=1) where memcgd
// does not pace: a kernel before 6.18, where it freezes by default, or
// cgroups without the cpu controller (the default; vmrun -cpu enables it
// on v2). Where says what runs the test instead. Outside a VM it does
// nothing: the caller checks the host's controllers.
func SkipVMWithoutPacing(t testing.TB, where string) {
	t.Helper()
	if os.Getenv("MEMCGD_VM") != "1" {
		return
	}
	if release, ok := KernelAtLeast(t, 6, 18); !ok {
		t.Skipf("the test VM's kernel %s is older than 6.18, where memcgd does not pace by default: %s", release, where)
	}
	b, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control")
	if err != nil || !slices.Contains(strings.Fields(string(b)), "cpu") {
		t.Skipf("the test VM's cgroups have no cpu controller (vmrun -cpu enables it): %s", where)
	}
}
