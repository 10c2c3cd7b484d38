package vm

import (
	"fmt"
	"path"
	"strings"
	"time"
)

// A Job is one command the VM runs between a begin and an end marker. The
// VM runs jobs in order, each with a fresh TMPDIR on the throttled ext4 disk,
// an empty page cache, and the environment CI=true, MEMCGD_VM=1,
// MEMCGD_VM_CGROUP (v1 or v2) and MEMCGD_VM_WRITE_BPS, plus Env.
type Job struct {
	// Name identifies the job in the markers: letters, digits, '.', '_', '-'.
	Name string
	// Dir is the working directory inside the VM.
	Dir string
	// Args is the command line inside the VM; Args[0] is a path or a
	// busybox applet.
	Args []string
	// Files maps paths inside the VM to host files or directories copied
	// into the initramfs for this job.
	Files map[string]string
	// Env holds NAME=VALUE entries added to the job's environment, over
	// the VM's: the way to pass a test the settings it reads from its
	// environment (MEMCGD_OVERHEAD=1), since /init sets a fixed one.
	Env []string
}

// TestJob returns the job that runs a test binary verbosely inside the VM:
// the binary at /tests/<name>.test, run from /src/<package dir> where the
// package's testdata directory (if any) is copied, so relative paths work as
// under go test. run is passed as -test.run when not empty; timeout bounds
// the binary (-test.timeout), so a hung test ends its job and not the VM.
func TestJob(b TestBinary, run string, timeout time.Duration) Job {
	bin := "/tests/" + b.Name + ".test"
	dir := path.Join("/src", b.RelDir)
	j := Job{
		Name:  b.Name,
		Dir:   dir,
		Args:  []string{bin, "-test.v", "-test.timeout=" + timeout.String()},
		Files: map[string]string{bin: b.Path},
	}
	if run != "" {
		j.Args = append(j.Args, "-test.run="+run)
	}
	if b.Testdata != "" {
		j.Files[path.Join(dir, "testdata")] = b.Testdata
	}
	return j
}

// ShellJob returns a job named "shell" that runs cmd with the VM's sh from
// the disk's TMPDIR.
func ShellJob(cmd string) Job {
	return Job{Name: "shell", Dir: "/mnt/tmp", Args: []string{"sh", "-c", cmd}}
}

// validate checks what the init script and the markers rely on.
func (j Job) validate() error {
	if j.Name == "" || strings.IndexFunc(j.Name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}) >= 0 {
		return fmt.Errorf("job name %q: want letters, digits, '.', '_' or '-'", j.Name)
	}
	if !path.IsAbs(j.Dir) {
		return fmt.Errorf("job %s: dir %q: want an absolute path inside the VM", j.Name, j.Dir)
	}
	if len(j.Args) == 0 {
		return fmt.Errorf("job %s: args empty: want a command", j.Name)
	}
	for _, kv := range j.Env {
		if err := CheckEnv(kv); err != nil {
			return fmt.Errorf("job %s: %w", j.Name, err)
		}
	}
	if len(j.Env) > 0 && strings.Contains(j.Args[0], "=") {
		return fmt.Errorf("job %s: command %q holds '=': with Env, env(1) would take it for an assignment; want a path or applet without '='", j.Name, j.Args[0])
	}
	for p := range j.Files {
		if !path.IsAbs(p) {
			return fmt.Errorf("job %s: file %q: want an absolute path inside the VM", j.Name, p)
		}
	}
	return nil
}

// CheckEnv checks that kv is an environment entry NAME=VALUE whose name is
// [A-Z_][A-Z0-9_]*: a name every shell can export, which keeps names with
// '=' or spaces from changing what the entry means.
func CheckEnv(kv string) error {
	name, _, ok := strings.Cut(kv, "=")
	if !ok {
		return fmt.Errorf("env %q: want NAME=VALUE", kv)
	}
	if name == "" || name[0] >= '0' && name[0] <= '9' || strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_')
	}) >= 0 {
		return fmt.Errorf("env %q: name %q: want [A-Z_][A-Z0-9_]*", kv, name)
	}
	return nil
}

// jobsScript renders the jobs as the lines of /vm/jobs (see init.sh). A
// job's Env goes in front of its Args as busybox env(1)'s assignments, so
// init.sh's job function runs it as it runs any command.
func jobsScript(jobs []Job) []byte {
	var b strings.Builder
	for _, j := range jobs {
		b.WriteString("job")
		words := []string{j.Name, j.Dir}
		if len(j.Env) > 0 {
			words = append(append(words, "env"), j.Env...)
		}
		for _, w := range append(words, j.Args...) {
			b.WriteByte(' ')
			b.WriteString(shellQuote(w))
		}
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// shellQuote quotes s as one word for a POSIX shell: in single quotes, each
// single quote inside closed, escaped and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
