package daemon

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// memcgd is the daemon binary the tests run, and memcgdErr why there is
// none. TestMain sets both before any test runs; tests only read them,
// through memcgdBinary.
var (
	memcgd    string
	memcgdErr error
)

// errNoBinary reports that neither a Go toolchain nor a memcgd on PATH
// is there (a VM without test/vm's /bin/memcgd).
var errNoBinary = errors.New("no memcgd binary: no Go toolchain to build ./cmd/memcgd and no memcgd on PATH")

// TestMain builds the daemon once for the whole run. Started with
// anonHelper as its first argument, the test binary is the anonymous
// memory helper instead (startAnon); with nodeHelper or podHelper, a
// launcher of processes in namespaces (pod_test.go).
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == anonHelper {
		os.Exit(runAnonHelper(os.Args[2]))
	}
	if len(os.Args) == 3 && os.Args[1] == sleeperHelper {
		os.Exit(runSleeperHelper(os.Args[2]))
	}
	if len(os.Args) > 1 && (os.Args[1] == nodeHelper || os.Args[1] == podHelper) {
		os.Exit(runNamespaceHelper(os.Args[1], os.Args[2:]))
	}
	dir, err := os.MkdirTemp("", "memcgd-daemon-test-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "test/daemon: %v\n", err)
		os.Exit(2)
	}
	memcgd, memcgdErr = findBinary(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// findBinary returns the memcgd to test: $MEMCGD_BIN if set; else, where
// there is a Go toolchain, ./cmd/memcgd of this module built into dir;
// else the memcgd on PATH, which is how test/vm ships it into the VM.
// dir and the binary are made readable and executable by everyone, so
// that a test can run the client as another user.
func findBinary(dir string) (string, error) {
	if bin := os.Getenv("MEMCGD_BIN"); bin != "" {
		return bin, nil
	}
	if _, err := exec.LookPath("go"); err != nil {
		bin, err := exec.LookPath("memcgd")
		if err != nil {
			return "", errNoBinary
		}
		return bin, nil
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside a Go module")
	}
	bin := filepath.Join(dir, "memcgd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/memcgd")
	build.Dir = filepath.Dir(mod)
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/memcgd: %w\n%s", err, out)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	return bin, nil
}

// memcgdBinary returns the daemon binary. A build failure fails the test;
// no binary at all fails it in CI and skips it elsewhere.
func memcgdBinary(t testing.TB) string {
	t.Helper()
	switch {
	case memcgdErr == nil:
		return memcgd
	case errors.Is(memcgdErr, errNoBinary) && os.Getenv("CI") != "true":
		t.Skip(memcgdErr)
	default:
		t.Fatal(memcgdErr)
	}
	return ""
}
