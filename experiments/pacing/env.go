package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/experiments/internal/lab"
	"github.com/memcgd/memcgd/internal/sandbox"
)

// env is the experiment's bench: the lab, the cgroup layout and the
// binary re-executed as tenant, victim and pacer.
type env struct {
	b   *lab.Bench
	o   options
	exe string
	// v2 says memory and cpu are on cgroup v2 (the test VM); otherwise the
	// cpu controller is on a v1 hierarchy, where the lab mirrors each
	// cgroup at the same path (lab.Cgroup.CPU).
	v2    bool
	mechs []string
	n     int // names the journals
}

func newEnv(b *lab.Bench, o options) (*env, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	e := &env{b: b, o: o, exe: exe, v2: b.Layout.Memory.Version == layout.V2}
	if e.v2 {
		if err := e.enableCPUv2(); err != nil {
			return nil, err
		}
	} else if b.Layout.CPU == nil {
		return nil, errors.New("no v1 hierarchy with the cpu controller is mounted")
	}
	e.mechs = o.mechs
	if len(e.mechs) == 0 {
		e.mechs = []string{mechV1}
		if e.v2 {
			e.mechs = []string{mechThreaded, mechLeaf}
		}
	}
	for _, m := range e.mechs {
		if (m == mechV1) == e.v2 {
			return nil, fmt.Errorf("-mechs: %s does not apply to this host's cgroup layout (v2 %v)", m, e.v2)
		}
	}
	return e, nil
}

// enableCPUv2 gives the lab's cgroups the cpu controller on v2: it must be
// in cgroup.subtree_control on the way down from this process's cgroup.
// The VM's root is the VM's own (it powers off after the run), so there it
// is enabled if need be; elsewhere it must be enabled already.
func (e *env) enableCPUv2() error {
	self, err := layout.Self("/proc", e.b.Layout)
	if err != nil {
		return err
	}
	top := e.b.Layout.Memory.Dir(self)
	on, err := enabled(top, "cpu")
	if err != nil {
		return err
	}
	if !on {
		if os.Getenv("MEMCGD_VM") != "1" {
			return fmt.Errorf("cgroup %s does not enable cpu for its children, and it is not this experiment's to change: run with -vm v2", self)
		}
		if err := writeFile(filepath.Join(top, "cgroup.subtree_control"), "+cpu"); err != nil {
			return err
		}
	}
	return writeFile(filepath.Join(e.b.Root.Dir, "cgroup.subtree_control"), "+cpu")
}

// tcg is a tenant's cgroups: its memory cgroup (with the lab's freezer
// and unified mirrors) and its cpu cgroup, the memory cgroup itself on v2
// and on v1 the lab's mirror at the same path in the cpu hierarchy, as
// kubelet gives a container the same path in every hierarchy.
type tcg struct {
	e   *env
	mem *lab.Cgroup
	cpu string
}

// tenantCgroup makes a tenant's cgroups called name beneath parent (the
// lab's root when nil).
func (e *env) tenantCgroup(name string, parent *lab.Cgroup) (*tcg, error) {
	c, err := e.b.Cgroup(parent, name, lab.CgroupOptions{Mirror: true})
	if err != nil {
		return nil, err
	}
	t := &tcg{e: e, mem: c, cpu: c.Dir}
	if e.v2 {
		return t, nil
	}
	if c.CPU == "" {
		return nil, fmt.Errorf("cpu cgroup of %s: the lab made no mirror in the cpu hierarchy %s (is this process's cpu cgroup above %s?)",
			c.Path, e.b.Layout.CPU.Mount, c.Path)
	}
	t.cpu = c.CPU
	// Closers run latest first: the tenants' processes, registered
	// later, are killed before this removes a pace group they are in,
	// and the lab removes the cpu cgroup itself after.
	e.b.OnClose(t.removePace)
	return t, nil
}

// removePace removes the pace group a failed run left in the tenant's v1
// cpu cgroup, after killing what is still in it: only the tenant's
// processes and what they forked. The lab's removal of the cgroup, which
// fails while a child is left, comes after.
func (t *tcg) removePace() error {
	d := filepath.Join(t.cpu, paceName)
	if _, err := os.Stat(d); err != nil {
		return nil
	}
	var errs []error
	deadline := time.Now().Add(sandbox.Settle)
	for {
		tids, err := readIDs(filepath.Join(d, "tasks"))
		if err != nil || len(tids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("remove %s: tasks %v stay", d, tids))
			break
		}
		for _, tid := range tids {
			_ = syscall.Kill(tid, syscall.SIGKILL) // the whole process
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.Join(append(errs, rmdirCgroup(d))...)
}

// remove removes the tenant's cgroups now rather than at the lab's close.
func (t *tcg) remove() error {
	var errs []error
	if !t.e.v2 {
		// The pace group first: the lab's removal of the memory cgroup
		// and its cpu mirror fails while the mirror has a child.
		// removePace runs again at close, a no-op.
		errs = append(errs, t.removePace(), t.e.b.Remove(t.mem))
	} else {
		if _, err := os.Stat(filepath.Join(t.cpu, paceName)); err == nil {
			// A pace group left by a failed run: its threads go back
			// to the leaf, to be killed with it.
			if _, err := drain(filepath.Join(t.cpu, paceName), t.cpu, "cgroup.threads"); err != nil {
				errs = append(errs, err)
			}
			errs = append(errs, rmdirCgroup(filepath.Join(t.cpu, paceName)))
		}
		errs = append(errs, t.e.b.Remove(t.mem))
	}
	return errors.Join(errs...)
}

// journal returns a new journal's path in the lab's temporary directory.
func (e *env) journal() string {
	e.n++
	return e.b.Temp(fmt.Sprintf("pace-journal-%d", e.n))
}

// pacer returns mechanism mech's pacer for the tenant, journalling to a
// new journal.
func (t *tcg) pacer(mech string) (Pacer, error) {
	path := t.e.journal()
	j, err := OpenJournal(path)
	if err != nil {
		return nil, err
	}
	t.e.b.OnClose(j.Close)
	return t.pacerWith(mech, j, path, noStep)
}

func (t *tcg) pacerWith(mech string, j *Journal, path string, step stepFunc) (Pacer, error) {
	switch mech {
	case mechV1:
		return newV1Child(t.cpu, j, path, step), nil
	case mechThreaded:
		return newV2Threaded(t.cpu, j, path, step), nil
	case mechLeaf:
		return newV2Leaf(t.cpu, j, path, step), nil
	}
	return nil, fmt.Errorf("mechanism %q: want v1, threaded or leaf", mech)
}

// paceDir is the directory whose cpu.stat tells mech's throttling.
func (t *tcg) paceDir(mech string) string {
	if mech == mechLeaf {
		return t.cpu
	}
	return filepath.Join(t.cpu, paceName)
}

// freezer returns the tenant's freezer: the v1 freezer on a hybrid host,
// as memcgd uses it there, cgroup.freeze on v2.
func (t *tcg) freezer() (*dutyFreezer, error) {
	if t.e.v2 {
		return newDutyFreezer("", t.mem.Unified)
	}
	return newDutyFreezer(t.mem.Freezer, t.mem.Unified)
}

// proc is a running tenant.
type proc struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr bytes.Buffer
	ready  tenantReady
}

// tenantEnv is the Go runtime's setting for the tenant: no garbage
// collection (so no stop-the-world waits for a paced thread) and no
// asynchronous preemption (so no runtime signal cuts a read short).
var tenantEnv = []string{"GOGC=off", "GODEBUG=asyncpreemptoff=1"}

// start runs a tenant with cfg in the tenant's cgroups.
func (t *tcg) start(ctx context.Context, cfg tenantConfig) (*proc, error) {
	cmd := t.mem.Command(ctx, t.e.exe, cfg.args()...)
	cmd.Env = append(os.Environ(), tenantEnv...)
	p := &proc{cmd: cmd}
	cmd.Stderr = &p.stderr
	var err error
	if p.in, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.out = bufio.NewReader(out)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("tenant: %w", err)
	}
	t.e.b.OnClose(p.kill)
	if err := p.read(&p.ready); err != nil {
		return nil, err
	}
	if !t.e.v2 {
		// cgroup.procs moves every thread of the process.
		if err := writeFile(filepath.Join(t.cpu, "cgroup.procs"), strconv.Itoa(p.ready.PID)); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// read decodes the tenant's next line into v.
func (p *proc) read(v any) error {
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("tenant: %w (stderr %q)", err, p.stderr.String())
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(line, &e) == nil && e.Error != "" {
		return fmt.Errorf("tenant: %s", e.Error)
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("tenant: %q: %w", line, err)
	}
	return nil
}

// call sends a command and decodes its answer into v (nil: none wanted).
func (p *proc) call(cmd string, v any) error {
	if _, err := io.WriteString(p.in, cmd+"\n"); err != nil {
		return fmt.Errorf("tenant %s: %w", cmd, err)
	}
	if err := p.read(v); err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	return nil
}

// stop ends the loop and returns its result.
func (p *proc) stop() (tenantResult, error) {
	var r tenantResult
	err := p.call("stop", &r)
	return r, err
}

// close ends the tenant: it exits at the end of its input.
func (p *proc) close() error {
	p.in.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		return fmt.Errorf("tenant %d did not exit: killed", p.cmd.Process.Pid)
	}
}

// kill kills the tenant at the lab's close, by PID, if it still runs.
func (p *proc) kill() error {
	if p.cmd.ProcessState != nil {
		return nil
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	return nil
}

// threadIO is a thread's /proc/PID/task/TID/io.
type threadIO struct {
	WChar, WriteBytes, CancelledWriteBytes uint64
}

func readThreadIO(pid, tid int) (threadIO, error) {
	p := fmt.Sprintf("/proc/%d/task/%d/io", pid, tid)
	if tid == 0 {
		p = fmt.Sprintf("/proc/%d/io", pid)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return threadIO{}, err
	}
	var io threadIO
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		switch k {
		case "wchar":
			io.WChar = n
		case "write_bytes":
			io.WriteBytes = n
		case "cancelled_write_bytes":
			io.CancelledWriteBytes = n
		}
	}
	return io, nil
}

// threadCPU is the time thread tid has run, from its schedstat.
func threadCPU(pid, tid int) (time.Duration, error) {
	s, err := readTrim(fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, tid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, fmt.Errorf("schedstat of %d: empty", tid)
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	return time.Duration(ns), err
}

// cpuStat reads a cpu cgroup's cpu.stat: nr_periods, nr_throttled and the
// throttled time (v1 throttled_time in ns, v2 throttled_usec).
func cpuStat(dir string) (periods, throttled uint64, throttledTime time.Duration, err error) {
	s, err := readTrim(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, 0, 0, err
	}
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		n, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "nr_periods":
			periods = n
		case "nr_throttled":
			throttled = n
		case "throttled_time":
			throttledTime = time.Duration(n)
		case "throttled_usec":
			throttledTime = time.Duration(n) * time.Microsecond
		}
	}
	return periods, throttled, throttledTime, nil
}

// load1 is the one-minute load average, as the tables print it beside
// timing figures on a shared machine.
func load1() string {
	s, err := readTrim("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(s)[0]
}

func load1f() float64 {
	f, _ := strconv.ParseFloat(load1(), 64)
	return f
}
