package vm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// markerPrefix starts every marker the VM's /init writes on the results port.
const markerPrefix = "@@memcgd-vm "

// A Result is what one job did in the VM.
type Result struct {
	Name    string
	Began   bool   // the begin marker arrived
	Ended   bool   // the end marker arrived
	Exit    int    // exit status from the end marker
	Output  []byte // the job's stdout and stderr
	Problem string // why the job failed; "" when it passed
}

// Passed reports whether the job ran to its end and succeeded.
func (r Result) Passed() bool { return r.Problem == "" }

// A Report is the outcome of one VM run.
type Report struct {
	Results  []Result // one per job, in the order given to Run
	Ready    bool     // /init set the VM up and started the jobs
	Done     bool     // /init ran every job
	Error    string   // the message of an "error" marker: /init failed to set up
	Kernel   string   // the first kernel console line that reports a crash, or ""
	TimedOut bool     // the VM was killed at the timeout
	Console  []byte   // the kernel console (ttyS0)
	Stream   []byte   // the results port (ttyS1), verbatim
}

// Err returns nil when every job passed and the VM finished; otherwise an
// error naming each failure.
func (r *Report) Err() error {
	var errs []error
	if r.TimedOut {
		errs = append(errs, errors.New("VM timed out"))
	}
	if r.Error != "" {
		errs = append(errs, fmt.Errorf("VM setup: %s", r.Error))
	}
	if r.Kernel != "" {
		errs = append(errs, fmt.Errorf("kernel: %s", r.Kernel))
	}
	if !r.Done && r.Error == "" && !r.TimedOut {
		errs = append(errs, errors.New("VM stopped before the done marker"))
	}
	for _, res := range r.Results {
		if !res.Passed() {
			errs = append(errs, fmt.Errorf("%s: %s", res.Name, res.Problem))
		}
	}
	return errors.Join(errs...)
}

// parseReport reads the results port and the console of a finished VM and
// judges each job. A job passes when its end marker arrived with exit 0 and
// its output has no "--- FAIL" or Go panic line.
func parseReport(jobs []Job, stream, console []byte) *Report {
	r := &Report{Stream: stream, Console: console}
	index := make(map[string]int, len(jobs))
	r.Results = make([]Result, len(jobs))
	for i, j := range jobs {
		index[j.Name] = i
		r.Results[i].Name = j.Name
	}
	cur := -1
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		line := sc.Text()
		at := strings.Index(line, markerPrefix)
		if at < 0 {
			if cur >= 0 {
				r.Results[cur].Output = append(append(r.Results[cur].Output, line...), '\n')
			}
			continue
		}
		// A job's last line without a newline runs into the end marker.
		if at > 0 && cur >= 0 {
			r.Results[cur].Output = append(append(r.Results[cur].Output, line[:at]...), '\n')
		}
		verb, arg, _ := strings.Cut(line[at+len(markerPrefix):], " ")
		switch verb {
		case "ready":
			r.Ready = true
		case "done":
			r.Done = true
		case "error":
			r.Error = arg
		case "begin":
			cur = -1
			if i, ok := index[arg]; ok {
				cur = i
				r.Results[i].Began = true
			}
		case "end":
			name, exit, _ := strings.Cut(arg, " exit=")
			if i, ok := index[name]; ok {
				r.Results[i].Ended = true
				r.Results[i].Exit, _ = strconv.Atoi(exit)
			}
			cur = -1
		}
	}
	r.Kernel = kernelCrash(console)
	for i := range r.Results {
		r.Results[i].Problem = judge(r.Results[i])
	}
	return r
}

// judge returns why a job failed, or "" when it passed.
func judge(res Result) string {
	switch {
	case !res.Began:
		return "never started"
	case !res.Ended:
		return "did not finish (no end marker: VM crashed, hung or timed out)"
	case res.Exit != 0:
		return fmt.Sprintf("exit status %d", res.Exit)
	}
	for _, line := range strings.Split(string(res.Output), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--- FAIL") || strings.HasPrefix(line, "panic: ") {
			return fmt.Sprintf("exit status 0 but output has %q", line)
		}
	}
	return ""
}

// kernelCrash returns the first console line that reports that the kernel
// itself failed (kernel/panic.c panic, lib/bug.c report_bug,
// arch/x86/kernel/dumpstack.c die), or "".
func kernelCrash(console []byte) string {
	for _, line := range strings.Split(string(console), "\n") {
		for _, c := range []string{"Kernel panic", "BUG: ", "Oops: ", "general protection fault"} {
			if strings.Contains(line, c) {
				return strings.TrimSpace(line)
			}
		}
	}
	return ""
}
