package kernel

import (
	"strings"
	"testing"
)

// spinner burns CPU in slices of 100 µs until until: a CPU-bound task.
type spinner struct{ until Time }

func (s *spinner) Step(k *Kernel, t *Task) bool {
	if t.Now() >= s.until {
		return true
	}
	k.Compute(t, 100*Microsecond)
	return false
}

// sleeper sleeps 1 ms in a loop (nanosleep) and records how late each
// wake-up was.
type sleeper struct {
	until, next Time
	late        []Time
}

func (s *sleeper) Step(k *Kernel, t *Task) bool {
	if s.next > 0 {
		s.late = append(s.late, t.Now()-s.next)
	}
	if t.Now() >= s.until {
		return true
	}
	s.next = t.Now() + Millisecond
	k.Nanosleep(t, Millisecond)
	return false
}

func within(got, want, tol Time) bool { return got >= want-tol && got <= want+tol }

// kernel/sched/fair.c: a group with a quota of 20 ms per 100 ms period
// gives a CPU-bound task 20% of one CPU; it is throttled in every period,
// for the other 80 ms, and cpu.stat counts each period and throttle.
func TestCFSQuotaLimitsACPUBoundTask(t *testing.T) {
	for _, tc := range []struct {
		name          string
		quota, period Time
	}{
		{"20ms per 100ms", 20 * Millisecond, 100 * Millisecond},
		{"5ms per 10ms", 5 * Millisecond, 10 * Millisecond},
		{"1ms per 1s", Millisecond, Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := testKernel(t, 2, Options{})
			g := k.NewCPUGroup(0, "/spin")
			if err := k.SetCPUMax(g, tc.quota, tc.period, 0); err != nil {
				t.Fatal(err)
			}
			const run = 2 * Second
			task := k.NewTask("spin", 0, &spinner{until: run}, 0)
			k.MoveTask(task, g)
			k.Run(10 * Second)
			periods := int64(run / tc.period)
			wantCPU := Time(periods) * tc.quota
			// A step's overrun (100 µs) is paid from the next period.
			if !within(task.CPU, wantCPU, tc.quota+200*Microsecond) {
				t.Errorf("CPU %v, want about %v (%d periods of %v)", task.CPU, wantCPU, periods, tc.quota)
			}
			wall := task.End - task.Start
			if th := task.Stopped[StopCPUThrottled]; !within(th+task.CPU, wall, 0) {
				t.Errorf("CPU %v + throttled %v = %v, want the task's whole life %v", task.CPU, th, th+task.CPU, wall)
			}
			st := k.CPUStat(g)
			if st.NrPeriods < periods-1 || st.NrPeriods > periods+1 || st.NrThrottled < periods-2 || st.NrThrottled > st.NrPeriods {
				t.Errorf("nr_periods %d, nr_throttled %d, want about %d of each", st.NrPeriods, st.NrThrottled, periods)
			}
			if !within(st.ThrottledTime, task.Stopped[StopCPUThrottled], tc.period) {
				t.Errorf("throttled_time %v, the task was stopped %v", st.ThrottledTime, task.Stopped[StopCPUThrottled])
			}
			if st.Usage != task.CPU {
				t.Errorf("usage %v, the task ran %v", st.Usage, task.CPU)
			}
		})
	}
}

// A writer whose group may use 10% of a CPU dirties at 10% of its
// unthrottled rate: the per-page copy cost is what the quota paces.
func TestCFSQuotaPacesAWriter(t *testing.T) {
	rate := func(quota Time) float64 {
		k := testKernel(t, 2, Options{})
		k.cfg.WriteCostPerPage = 2600 // about 1.5 GB/s unthrottled
		g := k.NewCPUGroup(0, "/w")
		if quota != RuntimeInf {
			if err := k.SetCPUMax(g, quota, 100*Millisecond, 0); err != nil {
				t.Fatal(err)
			}
		}
		w := &seqWriter{ino: int64(k.NewInode(0)), pages: 1 << 30, block: 16}
		task := k.NewTask("w", 0, w, 0)
		k.MoveTask(task, g)
		k.Advance(50 * Millisecond) // below the dirty limits: no throttle but the CPU's
		return float64(task.Written) / 0.05
	}
	free, paced := rate(RuntimeInf), rate(5*Millisecond)
	if want := 1 / 2600e-9; free < 0.95*want || free > 1.05*want {
		t.Fatalf("unthrottled writer dirtied %.0f pages/s, want about %.0f", free, want)
	}
	if paced < 0.09*free || paced > 0.11*free {
		t.Errorf("writer at 5ms per 100ms dirtied %.0f pages/s, want 5%% of %.0f", paced, free)
	}
}

// A child's tasks are charged to its parent too: two children allowed
// 50 ms each under a parent allowed 20 ms share the parent's 20%.
func TestCFSNestedGroupsShareTheParentsQuota(t *testing.T) {
	k := testKernel(t, 2, Options{})
	p := k.NewCPUGroup(0, "/p")
	a, b := k.NewCPUGroup(p, "/p/a"), k.NewCPUGroup(p, "/p/b")
	for _, g := range []struct {
		id    int32
		quota Time
	}{{p, 20 * Millisecond}, {a, 50 * Millisecond}, {b, 50 * Millisecond}} {
		if err := k.SetCPUMax(g.id, g.quota, 100*Millisecond, 0); err != nil {
			t.Fatal(err)
		}
	}
	ta := k.NewTask("a", 0, &spinner{until: Second}, 0)
	tb := k.NewTask("b", 0, &spinner{until: Second}, 0)
	k.MoveTask(ta, a)
	k.MoveTask(tb, b)
	k.Run(5 * Second)
	if sum := ta.CPU + tb.CPU; !within(sum, 200*Millisecond, 20*Millisecond) {
		t.Errorf("the children ran %v + %v = %v, want the parent's 10 × 20 ms", ta.CPU, tb.CPU, sum)
	}
	if k.CPUStat(p).Usage != ta.CPU+tb.CPU {
		t.Errorf("parent's usage %v, its children's tasks ran %v", k.CPUStat(p).Usage, ta.CPU+tb.CPU)
	}
	if k.CPUStat(a).NrThrottled != 0 {
		t.Errorf("child a throttled in %d periods: its own quota was never reached", k.CPUStat(a).NrThrottled)
	}
}

// Moving a stopped task out of a throttled group lets it run at once;
// moving it back stops it at its next step; the throttle is per group, so
// a task in another group is not held.
func TestCFSMoveTask(t *testing.T) {
	k := testKernel(t, 2, Options{})
	g := k.NewCPUGroup(0, "/g")
	if err := k.SetCPUMax(g, Millisecond, Second, 0); err != nil {
		t.Fatal(err)
	}
	task := k.NewTask("spin", 0, &spinner{until: 10 * Second}, 0)
	k.MoveTask(task, g)
	k.Advance(100 * Millisecond)
	if !k.CPUThrottled(g) || task.CPU > 2*Millisecond {
		t.Fatalf("throttled %v, CPU %v: want throttled after its 1 ms", k.CPUThrottled(g), task.CPU)
	}
	k.MoveTask(task, 0)
	k.Advance(200 * Millisecond)
	if ran := task.CPU; ran < 99*Millisecond {
		t.Errorf("moved to the root at 100 ms, the task ran %v by 200 ms, want about 100 ms more", ran)
	}
	cpu := task.CPU
	k.MoveTask(task, g)
	k.Advance(300 * Millisecond)
	if d := task.CPU - cpu; d > 200*Microsecond {
		t.Errorf("moved back into the throttled group, the task ran %v more", d)
	}
}

// A group without use for a period stops its period timer; its next use
// restarts it on the same phase, and nr_periods counts only active
// periods.
func TestCFSPeriodTimerStopsWhenIdle(t *testing.T) {
	k := testKernel(t, 2, Options{})
	g := k.NewCPUGroup(0, "/g")
	if err := k.SetCPUMax(g, 50*Millisecond, 100*Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	k.NewTask("spin", 0, &spinner{until: 1 * Millisecond}, 0)
	k.MoveTask(k.tasks[0], g)
	k.Advance(5 * Second)
	if n := k.CPUStat(g).NrPeriods; n > 3 {
		t.Errorf("nr_periods %d after 5 s of idleness, want the timer stopped after 2", n)
	}
	k.NewTask("spin2", 0, &spinner{until: 5*Second + 60*Millisecond}, 5*Second+30*Millisecond)
	k.MoveTask(k.tasks[1], g)
	k.Advance(5*Second + 50*Millisecond)
	if c := &k.cpuGroups[g]; !c.periodActive || c.expires%(100*Millisecond) != 0 {
		t.Errorf("timer active %v, expires %v: want it running on the 100 ms phase", c.periodActive, c.expires)
	}
}

// A sleeper in a throttled group wakes late, by up to the rest of the
// period: its nanosleep completes when the group may run again.
func TestCFSThrottledSleeperWakesLate(t *testing.T) {
	k := testKernel(t, 2, Options{})
	g := k.NewCPUGroup(0, "/g")
	if err := k.SetCPUMax(g, 5*Millisecond, 100*Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	sl := &sleeper{until: Second}
	k.MoveTask(k.NewTask("sleeper", 0, sl, 0), g)
	k.MoveTask(k.NewTask("spin", 0, &spinner{until: Second}, 0), g)
	k.Run(5 * Second)
	var worst Time
	for _, l := range sl.late {
		worst = max(worst, l)
	}
	if worst < 80*Millisecond || worst > 100*Millisecond {
		t.Errorf("worst wake-up %v late, want most of the 95 ms the group is throttled", worst)
	}
	if k.tasks[0].Stopped[StopCPUThrottled] == 0 {
		t.Error("the sleeper's stopped time has no CPU throttling")
	}
}

// The freezer holds a nanosleep past its end: a sleeper in a frozen cgroup
// wakes at the thaw, and the time counts as frozen.
func TestFreezerHoldsANanosleep(t *testing.T) {
	k := testKernel(t, 2, Options{})
	m := k.NewMemcg(0, "/m", -1, -1)
	sl := &sleeper{until: Second}
	task := k.NewTask("sleeper", m, sl, 0)
	k.Advance(100*Millisecond + 500*Microsecond)
	k.FreezeCgroup(m)
	k.Advance(150 * Millisecond)
	k.ThawCgroup(m)
	k.Run(5 * Second)
	var worst Time
	for _, l := range sl.late {
		worst = max(worst, l)
	}
	// Frozen at 100.5 ms in the sleep that ends at 101 ms; thawed at 150.
	if worst != 49*Millisecond {
		t.Errorf("worst wake-up %v late, want the 49 ms from the sleep's end to the thaw", worst)
	}
	if task.Stopped[StopFrozen] != 49*Millisecond {
		t.Errorf("frozen %v, want 49 ms", task.Stopped[StopFrozen])
	}
}

// tg_set_cfs_bandwidth(): what cpu.max and cpu.cfs_*_us accept.
func TestSetCPUMaxValidates(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		v                    int
		child                bool
		quota, period, burst Time
		err                  string // "" accepts
	}{
		{"max", 2, false, RuntimeInf, 100 * Millisecond, 0, ""},
		{"a quota above the period", 2, false, 300 * Millisecond, 100 * Millisecond, 0, ""},
		{"a burst", 2, false, 10 * Millisecond, 100 * Millisecond, 10 * Millisecond, ""},
		{"period under 1ms", 2, false, 10 * Millisecond, 500 * Microsecond, 0, "period 500µs: allowed 1ms to 1s"},
		{"period over 1s", 2, false, 10 * Millisecond, 2 * Second, 0, "period 2s: allowed 1ms to 1s"},
		{"quota under 1ms", 2, false, 500 * Microsecond, 100 * Millisecond, 0, "quota 500µs: allowed max or 1ms"},
		{"burst above quota", 2, false, 10 * Millisecond, 100 * Millisecond, 20 * Millisecond, "burst 20ms: allowed 0 to the quota 10ms"},
		{"burst without quota", 2, false, RuntimeInf, 100 * Millisecond, Millisecond, "allowed 0 without a quota"},
		{"v1 child above its parent", 1, true, 30 * Millisecond, 100 * Millisecond, 0, "more bandwidth than its parent"},
		{"v1 child at its parent's share", 1, true, 40 * Millisecond, 200 * Millisecond, 0, ""},
		{"v2 child above its parent", 2, true, 30 * Millisecond, 100 * Millisecond, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := testKernel(t, tc.v, Options{})
			g := k.NewCPUGroup(0, "/g")
			if tc.child {
				if err := k.SetCPUMax(g, 20*Millisecond, 100*Millisecond, 0); err != nil {
					t.Fatal(err)
				}
				g = k.NewCPUGroup(g, "/g/c")
			}
			err := k.SetCPUMax(g, tc.quota, tc.period, tc.burst)
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("rejected: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
	k := testKernel(t, 2, Options{})
	if err := k.SetCPUMax(0, 10*Millisecond, 100*Millisecond, 0); err == nil {
		t.Error("the root task group took a quota")
	}
}

// Raising the quota of a throttled group unthrottles it at once.
func TestSetCPUMaxUnthrottles(t *testing.T) {
	k := testKernel(t, 2, Options{})
	g := k.NewCPUGroup(0, "/g")
	if err := k.SetCPUMax(g, Millisecond, Second, 0); err != nil {
		t.Fatal(err)
	}
	task := k.NewTask("spin", 0, &spinner{until: 10 * Second}, 0)
	k.MoveTask(task, g)
	k.Advance(100 * Millisecond)
	if err := k.SetCPUMax(g, RuntimeInf, Second, 0); err != nil {
		t.Fatal(err)
	}
	k.Advance(200 * Millisecond)
	if task.CPU < 99*Millisecond || k.CPUThrottled(g) {
		t.Errorf("after cpu.max went to max at 100 ms the task ran %v by 200 ms (throttled %v)", task.CPU, k.CPUThrottled(g))
	}
}
