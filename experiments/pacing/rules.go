package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/memcgd/memcgd/experiments/internal/lab"
)

// rules records, on cgroup v2, what the kernel permits and refuses on the
// way to a threaded pace group, and what a container runtime would see
// meanwhile (kernel/cgroup/cgroup.c: cgroup_enable_threaded,
// cgroup_can_be_thread_root, cgroup_vet_subtree_control_enable,
// cgroup_attach_permissions).
func (e *env) rules(ctx context.Context) error {
	if !e.v2 {
		fmt.Printf("### cgroup v2 rules\n\nNot run: this host's cpu controller is on cgroup v1.\n\n")
		return nil
	}
	r := &rulebook{e: e}
	for _, c := range []func(context.Context, *rulebook) error{e.rulesKubelet, e.rulesNoCPU, e.rulesDomainCtl, e.rulesChildren, e.rulesTeardown} {
		if err := c(ctx, r); err != nil {
			return err
		}
	}
	fmt.Printf("### cgroup v2: what the kernel permits and refuses for a threaded pace group\n\n"+
		"Each row is one write, read or mkdir/rmdir and the kernel's answer; the types are cgroup.type after it "+
		"(the leaf's, and memcgd.pace's).\n\n%s\n", r.t.String())
	return nil
}

type rulebook struct {
	e        *env
	t        lab.Table
	kase     string
	leaf     string
	pace     string
	initOnce bool
}

func (r *rulebook) begin(kase, leaf string) {
	if !r.initOnce {
		r.t.Header = []string{"case", "step", "answer", "leaf type", "memcgd.pace type"}
		r.initOnce = true
	}
	r.kase, r.leaf, r.pace = kase, leaf, filepath.Join(leaf, paceName)
}

func (r *rulebook) typ(dir string) string {
	s, err := readTrim(filepath.Join(dir, "cgroup.type"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "—"
		}
		return errnoName(err)
	}
	return s
}

// row records a step and its answer.
func (r *rulebook) row(step string, answer string) {
	r.t.Add(r.kase, step, answer, r.typ(r.leaf), r.typ(r.pace))
	r.kase = ""
}

func (r *rulebook) do(step string, err error) { r.row(step, errnoName(err)) }

func (r *rulebook) write(file, v string) error {
	err := writeFile(file, v)
	rel, _ := filepath.Rel(filepath.Dir(r.leaf), file)
	r.do(fmt.Sprintf("echo %s > %s", v, rel), err)
	return err
}

func (r *rulebook) read(file string) string {
	s, err := readTrim(file)
	rel, _ := filepath.Rel(filepath.Dir(r.leaf), file)
	if err != nil {
		r.do("cat "+rel, err)
		return ""
	}
	r.row("cat "+rel, "`"+strings.ReplaceAll(s, "\n", " ")+"`")
	return s
}

func (r *rulebook) mkdir(dir string) error {
	err := os.Mkdir(dir, 0o755)
	rel, _ := filepath.Rel(filepath.Dir(r.leaf), dir)
	r.do("mkdir "+rel, err)
	return err
}

func (r *rulebook) rmdir(dir string) error {
	err := syscall.Rmdir(dir)
	rel, _ := filepath.Rel(filepath.Dir(r.leaf), dir)
	r.do("rmdir "+rel, err)
	return err
}

// rulesKubelet is kubelet's layout: a leaf with the container's processes
// whose parent enables cpu and memory.
func (e *env) rulesKubelet(ctx context.Context, r *rulebook) error {
	tc, err := e.tenantCgroup("rules-leaf", nil)
	if err != nil {
		return err
	}
	defer tc.remove()
	p, err := tc.start(ctx, tenantConfig{file: e.b.File("rules"), src: srcNone, chunk: 1 << 20, sleeper: true, idle: true})
	if err != nil {
		return err
	}
	defer p.close()
	leaf := tc.cpu
	r.begin("a leaf with processes, its parent enabling cpu and memory (kubelet's layout)", leaf)
	before := struct{ sub, max, typ string }{r.read(filepath.Join(leaf, "cgroup.subtree_control")), r.read(filepath.Join(leaf, "cpu.max")), r.typ(leaf)}
	if err := r.mkdir(r.pace); err != nil {
		return nil
	}
	if r.write(filepath.Join(r.pace, "cgroup.type"), "threaded") != nil {
		return r.undoRules()
	}
	if r.write(filepath.Join(leaf, "cgroup.subtree_control"), "+cpu") != nil {
		return r.undoRules()
	}
	_ = r.write(filepath.Join(leaf, "cgroup.subtree_control"), "+memory")
	_ = r.write(filepath.Join(r.pace, "cpu.max"), "20000 100000")
	tid := strconv.Itoa(p.ready.Writer)
	_ = r.write(filepath.Join(r.pace, "cgroup.threads"), tid)
	cg, err := threadCgroup(p.ready.PID, p.ready.Writer, "")
	r.row("/proc/PID/task/WRITER/cgroup", "`"+cg+"`"+errSuffix(err))
	cg, err = threadCgroup(p.ready.PID, p.ready.PID, "")
	r.row("/proc/PID/cgroup (the leader's)", "`"+cg+"`"+errSuffix(err))
	r.read(filepath.Join(leaf, "cgroup.procs"))
	procs, _ := readIDs(filepath.Join(leaf, "cgroup.procs"))
	r.row("cgroup.procs of the leaf lists the tenant's PID", fmt.Sprint(containsID(procs, p.ready.PID)))
	threads, _ := readIDs(filepath.Join(leaf, "cgroup.threads"))
	r.row("cgroup.threads of the leaf lists the writer's TID", fmt.Sprint(containsID(threads, p.ready.Writer)))
	r.read(filepath.Join(r.pace, "cgroup.procs"))
	r.read(filepath.Join(r.pace, "cgroup.threads"))
	_, err = os.Stat(filepath.Join(r.pace, "memory.current"))
	r.do("stat memcgd.pace/memory.current", err)

	// The charge: the paced writer dirties 32 MiB.
	cur0, _ := readTrim(filepath.Join(leaf, "memory.current"))
	st0, _ := e.b.Observe(tc.mem)
	if err := p.call(fmt.Sprintf("write %d", 32<<20), nil); err != nil {
		return err
	}
	cur1, _ := readTrim(filepath.Join(leaf, "memory.current"))
	st1, _ := e.b.Observe(tc.mem)
	c0, _ := strconv.ParseUint(cur0, 10, 64)
	c1, _ := strconv.ParseUint(cur1, 10, 64)
	r.row("the paced writer write(2)s 32 MiB: the leaf's memory.current Δ, memory.stat file_dirty Δ (MiB)",
		fmt.Sprintf("%.1f, %.1f", lab.MiB(c1-c0), lab.MiB(st1.Dirty-st0.Dirty)))

	// A process forked by the paced thread.
	var forked struct {
		PID int `json:"pid"`
	}
	if err := p.call("fork", &forked); err != nil {
		return err
	}
	time.Sleep(20 * time.Millisecond)
	cg, err = threadCgroup(forked.PID, forked.PID, "")
	r.row("the paced writer forks: /proc/CHILD/cgroup", "`"+cg+"`"+errSuffix(err))
	time.Sleep(200 * time.Millisecond)
	procs, _ = readIDs(filepath.Join(leaf, "cgroup.procs"))
	r.row(fmt.Sprintf("cgroup.procs of the leaf lists the child (PID %d)", forked.PID), fmt.Sprintf("%v (`%v`)", containsID(procs, forked.PID), procs))
	r.read(filepath.Join(r.pace, "cgroup.threads"))

	// A runtime adds a process (an exec into the container).
	spare, err := e.b.Cgroup(nil, "rules-spare", lab.CgroupOptions{})
	if err != nil {
		return err
	}
	sc := spare.Command(ctx, "sleep", "3600")
	if err := sc.Start(); err != nil {
		return err
	}
	defer func() { _ = sc.Process.Kill(); _ = sc.Wait() }()
	time.Sleep(20 * time.Millisecond)
	_ = r.write(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(sc.Process.Pid))
	// A runtime makes a domain child (a nested cgroup).
	nested := filepath.Join(leaf, "nested")
	if r.mkdir(nested) == nil {
		r.row("cgroup.type of leaf/nested", r.typ(nested))
		_ = r.write(filepath.Join(nested, "cgroup.procs"), strconv.Itoa(sc.Process.Pid))
		_ = r.rmdir(nested)
	}
	_ = r.rmdir(leaf)

	// The undo.
	n, err := drain(r.pace, leaf, "cgroup.threads")
	r.do(fmt.Sprintf("move every thread of memcgd.pace/cgroup.threads back to the leaf's (%d, the forked child's among them)", n), err)
	_ = r.rmdir(r.pace)
	_ = r.write(filepath.Join(leaf, "cgroup.subtree_control"), "-cpu")
	after := struct{ sub, max, typ string }{r.read(filepath.Join(leaf, "cgroup.subtree_control")), r.read(filepath.Join(leaf, "cpu.max")), r.typ(leaf)}
	r.row("the leaf as before (cgroup.type, subtree_control, cpu.max)", fmt.Sprint(before == after))
	_ = sc.Process.Kill()
	_ = sc.Wait()
	return e.b.Remove(spare)
}

func errSuffix(err error) string {
	if err != nil {
		return " (" + errnoName(err) + ")"
	}
	return ""
}

func containsID(ids []int, id int) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// undoRules removes what a failed case left.
func (r *rulebook) undoRules() error {
	if _, err := drain(r.pace, r.leaf, "cgroup.threads"); err != nil {
		return err
	}
	_ = rmdirCgroup(r.pace)
	_ = writeFile(filepath.Join(r.leaf, "cgroup.subtree_control"), "-cpu")
	return nil
}

// rulesNoCPU is a leaf whose parent enables memory but not cpu.
func (e *env) rulesNoCPU(ctx context.Context, r *rulebook) error {
	mid, err := e.b.Cgroup(nil, "rules-nocpu", lab.CgroupOptions{})
	if err != nil {
		return err
	}
	tc, err := e.tenantCgroup("leaf", mid)
	if err != nil {
		return err
	}
	p, err := tc.start(ctx, tenantConfig{file: e.b.File("rules"), src: srcNone, chunk: 1 << 20})
	if err != nil {
		return err
	}
	r.begin("a leaf with processes, its parent enabling memory but not cpu", tc.cpu)
	r.read(filepath.Join(mid.Dir, "cgroup.subtree_control"))
	if r.mkdir(r.pace) == nil {
		_ = r.write(filepath.Join(r.pace, "cgroup.type"), "threaded")
		_ = r.write(filepath.Join(tc.cpu, "cgroup.subtree_control"), "+cpu")
		_, err := os.Stat(filepath.Join(r.pace, "cpu.max"))
		r.do("stat memcgd.pace/cpu.max", err)
		_ = r.rmdir(r.pace)
	}
	_ = p.close()
	if err := tc.remove(); err != nil {
		return err
	}
	return e.b.Remove(mid)
}

// rulesDomainCtl is a cgroup with a domain controller in its own
// subtree_control (so without processes of its own: the
// no-internal-process rule).
func (e *env) rulesDomainCtl(ctx context.Context, r *rulebook) error {
	c, err := e.b.Cgroup(nil, "rules-domctl", lab.CgroupOptions{})
	if err != nil {
		return err
	}
	r.begin("a cgroup with memory in its own cgroup.subtree_control", c.Dir)
	_ = r.write(filepath.Join(c.Dir, "cgroup.subtree_control"), "+memory")
	if r.mkdir(r.pace) == nil {
		_ = r.write(filepath.Join(r.pace, "cgroup.type"), "threaded")
		_ = r.rmdir(r.pace)
	}
	_ = writeFile(filepath.Join(c.Dir, "cgroup.subtree_control"), "-memory")
	return e.b.Remove(c)
}

// rulesChildren is a leaf with child cgroups: populated, and empty.
func (e *env) rulesChildren(ctx context.Context, r *rulebook) error {
	parent, err := e.b.Cgroup(nil, "rules-children", lab.CgroupOptions{})
	if err != nil {
		return err
	}
	tc, err := e.tenantCgroup("child", parent)
	if err != nil {
		return err
	}
	p, err := tc.start(ctx, tenantConfig{file: e.b.File("rules"), src: srcNone, chunk: 1 << 20})
	if err != nil {
		return err
	}
	r.begin("a cgroup whose domain child has processes", parent.Dir)
	r.read(filepath.Join(parent.Dir, "cgroup.subtree_control"))
	if r.mkdir(r.pace) == nil {
		_ = r.write(filepath.Join(r.pace, "cgroup.type"), "threaded")
		_ = r.rmdir(r.pace)
	}
	_ = p.close()
	if err := tc.remove(); err != nil {
		return err
	}
	if err := e.b.Remove(parent); err != nil {
		return err
	}

	tc, err = e.tenantCgroup("rules-empty-child", nil)
	if err != nil {
		return err
	}
	defer tc.remove()
	p, err = tc.start(ctx, tenantConfig{file: e.b.File("rules"), src: srcNone, chunk: 1 << 20})
	if err != nil {
		return err
	}
	defer p.close()
	r.begin("a leaf with processes and an empty domain child", tc.cpu)
	empty := filepath.Join(tc.cpu, "empty")
	if r.mkdir(empty) != nil {
		return nil
	}
	if r.mkdir(r.pace) == nil {
		_ = r.write(filepath.Join(r.pace, "cgroup.type"), "threaded")
		r.row("cgroup.type of leaf/empty", r.typ(empty))
		_ = r.rmdir(r.pace)
	}
	_ = r.rmdir(empty)
	return nil
}

// rulesTeardown is a runtime's teardown while a pace group exists: the
// container killed through cgroup.kill, then its leaf removed.
func (e *env) rulesTeardown(ctx context.Context, r *rulebook) error {
	tc, err := e.tenantCgroup("rules-teardown", nil)
	if err != nil {
		return err
	}
	defer tc.remove()
	p, err := tc.start(ctx, tenantConfig{file: e.b.File("rules"), src: srcNone, chunk: 1 << 20})
	if err != nil {
		return err
	}
	defer p.close()
	r.begin("a runtime's teardown while the writer is paced", tc.cpu)
	pc, err := tc.pacer(mechThreaded)
	if err != nil {
		return err
	}
	if err := pc.Pace([]int{p.ready.Writer}, 20*time.Millisecond, 100*time.Millisecond); err != nil {
		return err
	}
	r.row("paced (mkdir, threaded, +cpu, cpu.max, cgroup.threads)", "ok")
	_ = r.write(filepath.Join(tc.cpu, "cgroup.kill"), "1")
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if s, _ := readTrim(filepath.Join(tc.cpu, "cgroup.events")); strings.Contains(s, "populated 0") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.read(filepath.Join(tc.cpu, "cgroup.events"))
	_ = r.rmdir(tc.cpu)
	err = pc.Release()
	r.do("the pacer's release (from its journal)", err)
	r.read(filepath.Join(tc.cpu, "cgroup.subtree_control"))
	return nil
}
