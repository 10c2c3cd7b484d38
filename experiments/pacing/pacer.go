package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// paceName is the pace group's name beneath the tenant's cgroup. The dot
// keeps it apart from the names runtimes give (Documentation/admin-guide/
// cgroup-v2.rst, "Avoid Name Collisions").
const paceName = "memcgd.pace"

// Mechanisms, as -mechs names them.
const (
	mechV1       = "v1"       // cgroup v1: the dirtying threads in a child cpu cgroup
	mechThreaded = "threaded" // cgroup v2: the dirtying threads in a threaded child
	mechLeaf     = "leaf"     // cgroup v2: cpu.max on the tenant's own leaf, the whole cgroup paced
)

// Pacer slows a tenant's dirtying threads with CFS bandwidth control
// (kernel/sched/fair.c tg_set_cfs_bandwidth): no signal is sent, a task
// over its quota is simply not picked until the next period refills it.
// Every change to a cgroup that is the tenant's is journalled before it
// is made, so that Release, or Undo after a crash, takes it back.
type Pacer interface {
	// Name is the mechanism's.
	Name() string
	// Pace paces threads tids at quota per period, making the pace group
	// the first time; called again, it changes the quota or adds threads.
	Pace(tids []int, quota, period time.Duration) error
	// Release undoes everything Pace did, from the journal, and clears it.
	Release() error
}

// stepFunc is called before each change a pacer makes to the kernel, with
// what it is about to do; the kill test's pacer dies in it.
type stepFunc func(what string)

func noStep(string) {}

// pacerBase holds what every mechanism has: the tenant's cgroup (in the
// cpu hierarchy on v1, the leaf on v2) and the journal.
type pacerBase struct {
	parent string
	j      *Journal
	jpath  string
	step   stepFunc
}

func (b *pacerBase) Release() error {
	did, err := Undo(b.jpath)
	if err != nil {
		return fmt.Errorf("release %s: %w (did %q)", b.parent, err, did)
	}
	return b.j.Clear()
}

func (b *pacerBase) mkdir(dir, threads string) error {
	ino, err := inode(b.parent)
	if err != nil {
		return fmt.Errorf("pace %s: %w", b.parent, err)
	}
	b.step("mkdir " + paceName)
	if err := b.j.Record(record{Op: opMkdir, Parent: b.parent, Ino: ino, Dir: dir, Threads: threads}); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("pace %s: %w", b.parent, err)
	}
	return nil
}

// v1Child is mechanism v1: a child cpu cgroup, memcgd.pace, beneath the
// thread's cpu cgroup, its quota in cpu.cfs_quota_us, and the dirtying
// threads' TIDs written to its tasks file. A v1 hierarchy takes threads
// one by one whatever their other hierarchies hold, so the memory charge
// stays where it was.
type v1Child struct {
	pacerBase
	dir  string
	made bool
}

func newV1Child(cpuDir string, j *Journal, jpath string, step stepFunc) *v1Child {
	return &v1Child{pacerBase: pacerBase{parent: cpuDir, j: j, jpath: jpath, step: step}, dir: filepath.Join(cpuDir, paceName)}
}

func (p *v1Child) Name() string { return mechV1 }

func (p *v1Child) Pace(tids []int, quota, period time.Duration) error {
	if !p.made {
		if err := p.mkdir(p.dir, "tasks"); err != nil {
			return err
		}
		p.made = true
	}
	p.step("cpu.cfs_period_us")
	if err := writeFile(filepath.Join(p.dir, "cpu.cfs_period_us"), usec(period)); err != nil {
		return err
	}
	p.step("cpu.cfs_quota_us")
	if err := writeFile(filepath.Join(p.dir, "cpu.cfs_quota_us"), quotaUsec(quota)); err != nil {
		return err
	}
	return p.move(tids, "tasks")
}

func (p *pacerBase) moveTo(dir string, tids []int, file string) error {
	for _, tid := range tids {
		p.step("move " + strconv.Itoa(tid))
		if err := writeFile(filepath.Join(dir, file), strconv.Itoa(tid)); err != nil {
			return err
		}
	}
	return nil
}

func (p *v1Child) move(tids []int, file string) error { return p.moveTo(p.dir, tids, file) }

// v2Threaded is mechanism threaded: a threaded child, memcgd.pace, of the
// tenant's leaf, which makes the leaf a threaded domain (kernel/cgroup/
// cgroup.c cgroup_enable_threaded): memory stays charged to the leaf,
// the domain of the whole subtree. cpu is enabled in the leaf's
// cgroup.subtree_control, which a populated leaf allows for threaded
// controllers only (cgroup_vet_subtree_control_enable), and the dirtying
// TIDs move through cgroup.threads, which moves threads only within one
// threaded domain.
type v2Threaded struct {
	pacerBase
	dir  string
	made bool
}

func newV2Threaded(leaf string, j *Journal, jpath string, step stepFunc) *v2Threaded {
	return &v2Threaded{pacerBase: pacerBase{parent: leaf, j: j, jpath: jpath, step: step}, dir: filepath.Join(leaf, paceName)}
}

func (p *v2Threaded) Name() string { return mechThreaded }

func (p *v2Threaded) Pace(tids []int, quota, period time.Duration) error {
	if !p.made {
		if err := p.mkdir(p.dir, "cgroup.threads"); err != nil {
			return err
		}
		p.made = true
		p.step("cgroup.type threaded")
		if err := writeFile(filepath.Join(p.dir, "cgroup.type"), "threaded"); err != nil {
			return err
		}
		on, err := enabled(p.parent, "cpu")
		if err != nil {
			return err
		}
		if !on {
			ino, err := inode(p.parent)
			if err != nil {
				return err
			}
			p.step("+cpu")
			if err := p.j.Record(record{Op: opEnable, Parent: p.parent, Ino: ino, Controller: "cpu"}); err != nil {
				return err
			}
			if err := writeFile(filepath.Join(p.parent, "cgroup.subtree_control"), "+cpu"); err != nil {
				return err
			}
		}
	}
	p.step("cpu.max")
	if err := writeFile(filepath.Join(p.dir, "cpu.max"), cpuMax(quota, period)); err != nil {
		return err
	}
	return p.moveTo(p.dir, tids, "cgroup.threads")
}

// v2Leaf is mechanism leaf: cpu.max on the tenant's own leaf, which paces
// every task of the cgroup. The tenant's own cpu.max (kubelet's, or
// systemd's CPUQuota=) is never raised: when it already allows no more
// than the pace, Pace leaves it alone; the value it found is restored
// only while the file still holds the pacer's (Undo).
type v2Leaf struct {
	pacerBase
	orig string // cpu.max as found, "" until the first Pace
}

func newV2Leaf(leaf string, j *Journal, jpath string, step stepFunc) *v2Leaf {
	return &v2Leaf{pacerBase: pacerBase{parent: leaf, j: j, jpath: jpath, step: step}}
}

func (p *v2Leaf) Name() string { return mechLeaf }

func (p *v2Leaf) Pace(_ []int, quota, period time.Duration) error {
	f := filepath.Join(p.parent, "cpu.max")
	if p.orig == "" {
		cur, err := readTrim(f)
		if err != nil {
			return err
		}
		p.orig = cur
	}
	share, err := cpuMaxShare(p.orig)
	if err != nil {
		return fmt.Errorf("%s: %w", f, err)
	}
	if share <= float64(quota)/float64(period) {
		return nil // the tenant's own limit is as tight: never raise it
	}
	ino, err := inode(p.parent)
	if err != nil {
		return err
	}
	v := cpuMax(quota, period)
	p.step("cpu.max")
	if err := p.j.Record(record{Op: opWrite, Parent: p.parent, Ino: ino, File: f, Old: p.orig, New: v}); err != nil {
		return err
	}
	return writeFile(f, v)
}

// cpuMax is cpu.max's "QUOTA PERIOD" in microseconds, as the kernel
// prints it back (kernel/sched/core.c cpu_max_show); a quota of 0 or less
// is "max".
func cpuMax(quota, period time.Duration) string { return quotaV2(quota) + " " + usec(period) }

func quotaV2(q time.Duration) string {
	if q <= 0 {
		return "max"
	}
	return usec(q)
}

func usec(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

// quotaUsec is cpu.cfs_quota_us's value: -1 for no quota.
func quotaUsec(q time.Duration) string {
	if q <= 0 {
		return "-1"
	}
	return usec(q)
}

// cpuMaxShare is the share of one CPU a cpu.max value allows, +Inf for
// "max".
func cpuMaxShare(v string) (float64, error) {
	f := strings.Fields(v)
	if len(f) != 2 {
		return 0, fmt.Errorf("cpu.max %q: want QUOTA PERIOD", v)
	}
	per, err := strconv.ParseFloat(f[1], 64)
	if err != nil || per <= 0 {
		return 0, fmt.Errorf("cpu.max %q: bad period", v)
	}
	if f[0] == "max" {
		return math.Inf(1), nil
	}
	q, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("cpu.max %q: bad quota", v)
	}
	return q / per, nil
}

// dutyFreezer is the freezer as memcgd uses it now, for comparison: the
// whole cgroup frozen and thawed in turn, thawed for share of each
// period.
type dutyFreezer struct {
	file           string // freezer.state (v1) or cgroup.freeze (v2)
	frozen, thawed string
	stop, done     chan struct{}
	cycles         int
}

// newDutyFreezer returns a freezer for the cgroup whose v1 freezer
// directory is v1dir, or, when that is "", whose unified directory is
// v2dir.
func newDutyFreezer(v1dir, v2dir string) (*dutyFreezer, error) {
	switch {
	case v1dir != "":
		return &dutyFreezer{file: filepath.Join(v1dir, "freezer.state"), frozen: "FROZEN", thawed: "THAWED"}, nil
	case v2dir != "":
		return &dutyFreezer{file: filepath.Join(v2dir, "cgroup.freeze"), frozen: "1", thawed: "0"}, nil
	}
	return nil, errors.New("freezer: the tenant's cgroup has no freezer")
}

// Start freezes and thaws in turn until Stop: thawed for share×period,
// frozen for the rest.
func (f *dutyFreezer) Start(share float64, period time.Duration) {
	f.stop, f.done = make(chan struct{}), make(chan struct{})
	on := time.Duration(share * float64(period))
	go func() {
		defer close(f.done)
		for {
			select {
			case <-f.stop:
				return
			case <-time.After(on):
			}
			_ = writeFile(f.file, f.frozen)
			f.cycles++
			select {
			case <-f.stop:
				return
			case <-time.After(period - on):
			}
			_ = writeFile(f.file, f.thawed)
		}
	}()
}

// Stop ends the cycle and leaves the cgroup thawed.
func (f *dutyFreezer) Stop() error {
	close(f.stop)
	<-f.done
	return writeFile(f.file, f.thawed)
}
