package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/memcgd/memcgd/experiments/internal/lab"
)

// The kill test: a pacer process (this binary with "pacer" first) paces a
// tenant's writer and is SIGKILLed just before each of its steps in turn,
// and once after its last; Undo then takes back what its journal holds,
// and the tenant's cgroups must be as they were.

func pacerMain(args []string) error {
	fs := flag.NewFlagSet("pacer", flag.ContinueOnError)
	mech := fs.String("mech", "", "mechanism: v1, threaded or leaf")
	dir := fs.String("dir", "", "the tenant's cgroup: its cpu cgroup on v1, its leaf on v2")
	tid := fs.Int("tid", 0, "the thread to pace")
	quota := fs.Duration("quota", 20*time.Millisecond, "quota per period")
	period := fs.Duration("period", 100*time.Millisecond, "period")
	jpath := fs.String("journal", "", "journal file")
	killAt := fs.Int("kill-at", 0, "SIGKILL itself just before step N (1 is the first); 0 never")
	if err := fs.Parse(args); err != nil {
		return err
	}
	j, err := OpenJournal(*jpath)
	if err != nil {
		return err
	}
	n := 0
	step := func(what string) {
		n++
		fmt.Printf("step %d %s\n", n, what)
		if n == *killAt {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	t := &tcg{cpu: *dir}
	pc, err := t.pacerWith(*mech, j, *jpath, step)
	if err != nil {
		return err
	}
	if err := pc.Pace([]int{*tid}, *quota, *period); err != nil {
		return err
	}
	fmt.Println("paced")
	select {} // until killed
}

// cgState is what the kill test compares before and after.
type cgState struct {
	pace     bool   // memcgd.pace exists
	writerCg string // the writer's cgroup in the cpu hierarchy
	leaf     string // v2: the leaf's cgroup.type, subtree_control and cpu.max
}

func (e *env) state(t *tcg, p *proc) cgState {
	var s cgState
	_, err := os.Stat(filepath.Join(t.cpu, paceName))
	s.pace = err == nil
	ctrl := "cpu"
	if e.v2 {
		ctrl = ""
	}
	s.writerCg, _ = threadCgroup(p.ready.PID, p.ready.Writer, ctrl)
	if e.v2 {
		typ, _ := readTrim(filepath.Join(t.cpu, "cgroup.type"))
		sub, _ := readTrim(filepath.Join(t.cpu, "cgroup.subtree_control"))
		mx, _ := readTrim(filepath.Join(t.cpu, "cpu.max"))
		s.leaf = fmt.Sprintf("%s; subtree_control %q; cpu.max %q", typ, sub, mx)
	}
	return s
}

func (s cgState) String() string {
	w := "pace group absent"
	if s.pace {
		w = "pace group present"
	}
	w += "; writer in …/" + filepath.Base(s.writerCg)
	if s.leaf != "" {
		w += "; leaf " + s.leaf
	}
	return w
}

func (e *env) kill(ctx context.Context) error {
	t := lab.Table{Header: []string{"mechanism", "SIGKILL", "left behind", "undo from the journal", "restored"}}
	for _, mech := range e.mechs {
		tc, err := e.tenantCgroup("kill-"+mech, nil)
		if err != nil {
			return err
		}
		p, err := tc.start(ctx, tenantConfig{file: e.b.File("kill"), src: srcZero, chunk: 1 << 20, cap: int64(e.o.fileCap)})
		if err != nil {
			return err
		}
		if err := p.call("stream", nil); err != nil {
			return err
		}
		if mech == mechLeaf {
			// A tenant's own limit, as kubelet sets: the undo must
			// bring back exactly this.
			if err := writeFile(filepath.Join(tc.cpu, "cpu.max"), "150000 100000"); err != nil {
				return err
			}
		}
		before := e.state(tc, p)
		for k := 1; ; k++ {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			jpath := e.journal()
			cmd := exec.CommandContext(ctx, e.exe, "pacer", "-mech", mech, "-dir", tc.cpu, "-tid", strconv.Itoa(p.ready.Writer),
				"-journal", jpath, "-kill-at", strconv.Itoa(k))
			out, err := cmd.StdoutPipe()
			if err != nil {
				return err
			}
			if err := cmd.Start(); err != nil {
				return err
			}
			var last string
			done := false
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				line := sc.Text()
				if line == "paced" {
					done = true
					_ = cmd.Process.Signal(syscall.SIGKILL)
					break
				}
				last = strings.TrimPrefix(line, "step ")
			}
			werr := cmd.Wait()
			when := "just before step " + last
			if done {
				when = "after its last step"
			} else if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
				return fmt.Errorf("pacer %s at step %d: %v", mech, k, werr)
			}
			left := e.state(tc, p)
			did, err := Undo(jpath)
			if err != nil {
				return fmt.Errorf("undo %s after step %d: %w", mech, k, err)
			}
			after := e.state(tc, p)
			t.Add(mech, when, left.String(), strings.Join(did, "; "), fmt.Sprint(after == before))
			if after != before {
				fmt.Printf("(%s, killed %s: before %v, after the undo %v)\n", mech, when, before, after)
			}
			if done {
				break
			}
		}
		if _, err := p.stop(); err != nil {
			return err
		}
		if err := p.close(); err != nil {
			return err
		}
		if err := tc.remove(); err != nil {
			return err
		}
	}
	fmt.Printf("### SIGKILL of the pacer, and the undo from its journal\n\nThe pacer journals (write, fsync) each change to the tenant's "+
		"cgroups before making it; it is killed just before each step in turn, and once when done. The leaf arm starts from a "+
		"tenant's own cpu.max of 150000 100000.\n\n%s\n", t.String())
	return nil
}
