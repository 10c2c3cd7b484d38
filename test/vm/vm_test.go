package vm

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestVM runs the suite's packages (SuitePackages) inside a real kernel,
// once per cgroup version: TestVM/cgroup-v2 and TestVM/cgroup-v1, with a
// subtest per test binary. Any failing test, Go panic, kernel crash, missing
// marker or timeout fails it.
func TestVM(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM twice (about a minute): not in -short mode")
	}
	assets := requireAssets(t)
	ctx := t.Context()
	mod, err := ModuleDir(ctx, ".")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	jobs, err := TestJobs(ctx, mod, SuitePackages(), "", DefaultTestTimeout, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %d test binaries in %v", len(jobs), time.Since(start).Round(time.Millisecond))

	for _, cg := range []Cgroup{CgroupV2, CgroupV1} {
		t.Run("cgroup-"+string(cg), func(t *testing.T) {
			runJobs(t, Config{Assets: assets, Cgroup: cg, WorkDir: t.TempDir()}, jobs)
		})
	}
}

// TestVMPaced runs the pace tests, and the tracker's, on cgroup v2 with
// the cpu controller in a kernel memcgd paces on by default (KernelPaced):
// the v2 pace groups (cgroup.threads in a threaded child, cpu.max) and a
// newer kernel's BPF verifier and folio layout, which the stable kernel
// does not have.
func TestVMPaced(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM (about three minutes): not in -short mode")
	}
	assets := requireKernel(t, KernelPaced)
	ctx := t.Context()
	mod, err := ModuleDir(ctx, ".")
	if err != nil {
		t.Fatal(err)
	}
	var jobs []Job
	for _, set := range []struct {
		pkgs []string
		run  string
	}{
		{[]string{"./cgroupfs/dirtytrack"}, ""},
		{[]string{"./cgroupfs", "./cgroupfs/act", "./test/daemon"}, "Pace|Pacer|Sleeper|CPULimit|CrashSafety"},
	} {
		js, err := TestJobs(ctx, mod, set.pkgs, set.run, DefaultTestTimeout, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, js...)
	}
	t.Logf("kernel %s", assets.Release)
	runJobs(t, Config{Assets: assets, Cgroup: CgroupV2, CPUController: true, SingleThreadTCG: true, WorkDir: t.TempDir()}, jobs)
}

// runJobs boots a VM with cfg, runs jobs in it, and fails t for any
// failing test, Go panic, kernel crash, missing marker or timeout, with a
// subtest per job.
func runJobs(t *testing.T, cfg Config, jobs []Job) {
	t.Helper()
	start := time.Now()
	report, err := Run(t.Context(), cfg, jobs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("VM ran %d jobs in %v", len(jobs), time.Since(start).Round(time.Millisecond))
	for _, res := range report.Results {
		t.Run(res.Name, func(t *testing.T) {
			if !res.Passed() {
				t.Fatalf("%s; the failed tests' output:\n%s\nthe whole output in the VM:\n%s", res.Problem, FailedOutput(res.Output), res.Output)
			}
			t.Log(summary(res.Output))
		})
	}
	if report.TimedOut || report.Error != "" || report.Kernel != "" || !report.Done {
		t.Errorf("%v\nkernel console:\n%s", report.Err(), report.Console)
	}
}

// requireAssets returns the VM's assets with the stable kernel, or ends
// the test when they are missing: a failure in CI, a skip elsewhere.
func requireAssets(t *testing.T) Assets {
	t.Helper()
	return requireKernel(t, KernelCurrent)
}

// requireKernel is requireAssets with the kernel linked as link.
func requireKernel(t *testing.T, link string) Assets {
	t.Helper()
	a, err := LocateKernel(DefaultCacheDir(), link)
	switch {
	case err == nil:
		return a
	case errors.Is(err, ErrNotInstalled) && os.Getenv("CI") != "true":
		t.Skipf("VM harness: %v", err)
	default:
		t.Fatalf("VM harness: %v", err)
	}
	return Assets{}
}

// requireTool ends the test for a missing host tool: a failure in CI, a
// skip elsewhere.
func requireTool(t *testing.T, name string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s: %v (run scripts/install-deps)", name, err)
	}
	t.Skipf("%s: %v (run scripts/install-deps)", name, err)
}

// summary counts a passing binary's test results, naming the skipped ones:
// inside the VM a skip usually means a missing precondition.
func summary(out []byte) string {
	var pass int
	var skips []string
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "--- PASS") {
			pass++
		}
		if name, ok := strings.CutPrefix(line, "--- SKIP: "); ok {
			skips = append(skips, strings.Fields(name)[0])
		}
	}
	return fmt.Sprintf("%d passed, %d skipped %q", pass, len(skips), skips)
}
