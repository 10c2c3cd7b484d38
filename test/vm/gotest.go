package vm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// SuitePackages returns the package patterns whose tests the VM suite runs:
// the packages with real-kernel tests, and the smoke test that checks the
// VM's own setup. Add a package here to have it tested on both cgroup
// versions.
func SuitePackages() []string {
	return []string{
		"./test/vm/smoke",
		"./cgroupfs/...",
		"./test/daemon",
	}
}

// SuiteCommands returns the module's commands that the suite's tests run as
// processes (test/daemon starts memcgd run): TestJobs builds each and puts
// it in the VM's /bin, on the jobs' PATH.
func SuiteCommands() []string {
	return []string{"./cmd/memcgd"}
}

// A TestBinary is a test binary built for the VM.
type TestBinary struct {
	Name       string // job name: the package directory relative to the module, '/' as '_'
	ImportPath string
	RelDir     string // package directory relative to the module root, slash-separated
	Path       string // the binary on the host
	Testdata   string // the package's testdata directory on the host, or ""
}

// BuildTests builds a static test binary for every package matched by
// patterns (as `go list` in moduleDir resolves them) that has test files,
// with `CGO_ENABLED=0 go test -c`, into outDir. A package that does not
// compile fails the build: in the suite, a test that cannot run is a failure.
func BuildTests(ctx context.Context, moduleDir string, patterns []string, outDir string) ([]TestBinary, error) {
	args := append([]string{"list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{len .TestGoFiles}}\t{{len .XTestGoFiles}}"}, patterns...)
	list := exec.CommandContext(ctx, "go", args...)
	list.Dir = moduleDir
	var stderr bytes.Buffer
	list.Stderr = &stderr
	out, err := list.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w\n%s", strings.Join(patterns, " "), err, stderr.Bytes())
	}
	var bins []TestBinary
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("go list: unexpected line %q", sc.Text())
		}
		if f[2] == "0" && f[3] == "0" {
			continue
		}
		rel, err := filepath.Rel(moduleDir, f[1])
		if err != nil || strings.HasPrefix(rel, "..") {
			return nil, fmt.Errorf("package %s: dir %s is outside module %s", f[0], f[1], moduleDir)
		}
		rel = filepath.ToSlash(rel)
		name := strings.ReplaceAll(rel, "/", "_")
		if rel == "." {
			name = filepath.Base(moduleDir)
		}
		b := TestBinary{Name: name, ImportPath: f[0], RelDir: rel, Path: filepath.Join(outDir, name+".test")}
		if fi, err := os.Stat(filepath.Join(f[1], "testdata")); err == nil && fi.IsDir() {
			b.Testdata = filepath.Join(f[1], "testdata")
		}
		bins = append(bins, b)
	}
	if len(bins) == 0 {
		return nil, fmt.Errorf("packages %s: no test files", strings.Join(patterns, " "))
	}
	for _, b := range bins {
		build := exec.CommandContext(ctx, "go", "test", "-c", "-o", b.Path, b.ImportPath)
		build.Dir = moduleDir
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go test -c %s: %w\n%s", b.ImportPath, err, out)
		}
	}
	return bins, nil
}

// DefaultTestTimeout bounds each test binary inside the VM (-test.timeout).
// test/daemon, the longest, ran 3 to 4 minutes in the VM on a quiet host,
// and 9.5 to past 10 minutes in the v1 VM at a host load of 9 to 10 (its
// crash test alone 147-187 s, the unpaced writer 200-240 s): the bound is
// on the emulator's speed, and DefaultTimeout bounds the whole VM.
const DefaultTestTimeout = 15 * time.Minute

// TestJobs builds the test binaries of patterns into outDir (BuildTests) and
// returns a TestJob for each.
func TestJobs(ctx context.Context, moduleDir string, patterns []string, run string, timeout time.Duration, outDir string) ([]Job, error) {
	bins, err := BuildTests(ctx, moduleDir, patterns, outDir)
	if err != nil {
		return nil, err
	}
	cmds, err := BuildCommands(ctx, moduleDir, SuiteCommands(), outDir)
	if err != nil {
		return nil, err
	}
	jobs := make([]Job, len(bins))
	for i, b := range bins {
		jobs[i] = TestJob(b, run, timeout)
		maps.Copy(jobs[i].Files, cmds)
	}
	return jobs, nil
}

// BuildCommands builds a static binary of each command package (a main
// package, as `go build` in moduleDir resolves it) into outDir, and returns
// them as Job.Files: /bin/<name> inside the VM to the binary on the host.
func BuildCommands(ctx context.Context, moduleDir string, pkgs []string, outDir string) (map[string]string, error) {
	files := make(map[string]string, len(pkgs))
	for _, pkg := range pkgs {
		name := path.Base(pkg)
		bin := filepath.Join(outDir, "cmd", name)
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
		build.Dir = moduleDir
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
		files["/bin/"+name] = bin
	}
	return files, nil
}

// ModuleDir returns the root of the Go module that contains dir.
func ModuleDir(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "env", "GOMOD")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD in %s: %w", dir, err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("%s is not inside a Go module", dir)
	}
	return filepath.Dir(mod), nil
}
