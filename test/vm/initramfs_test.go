package vm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestInitScriptParses(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on this host")
	}
	if out, err := exec.Command(sh, "-n", "-c", string(initScript)).CombinedOutput(); err != nil {
		t.Fatalf("sh -n init.sh: %v\n%s", err, out)
	}
}

// TestInitramfsHoldsWhatInitReads unpacks a built initramfs with cpio(1) and
// checks every file /init relies on, and the order of the modules.
func TestInitramfsHoldsWhatInitReads(t *testing.T) {
	a := requireAssets(t)
	cpio, err := exec.LookPath("cpio")
	if err != nil {
		requireTool(t, "cpio", err)
	}
	src := t.TempDir()
	mustWrite(t, filepath.Join(src, "x.test"), "binary", 0o755)
	mustWrite(t, filepath.Join(src, "testdata", "v2", "memory.stat"), "anon 0\n", 0o644)
	jobs := []Job{{
		Name:  "x",
		Dir:   "/src/x",
		Args:  []string{"/tests/x.test", "-test.v"},
		Files: map[string]string{"/tests/x.test": filepath.Join(src, "x.test"), "/src/x/testdata": filepath.Join(src, "testdata")},
	}, ShellJob("echo it's")}
	archive := filepath.Join(t.TempDir(), "initramfs.cpio")
	if err := writeInitramfs(archive, a, jobs); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	in, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	unpack := exec.Command(cpio, "-idm", "--quiet", "--no-absolute-filenames")
	unpack.Dir, unpack.Stdin = root, in
	if out, err := unpack.CombinedOutput(); err != nil {
		t.Fatalf("cpio -id: %v\n%s", err, out)
	}

	busybox, err := os.ReadFile(a.Busybox)
	if err != nil {
		t.Fatal(err)
	}
	files := []struct {
		path string
		data []byte
		perm os.FileMode
	}{
		{"init", initScript, 0o755},
		{"bin/busybox", busybox, 0o755},
		{"vm/jobs", jobsScript(jobs), 0o644},
		{"tests/x.test", []byte("binary"), 0o755},
		{"src/x/testdata/v2/memory.stat", []byte("anon 0\n"), 0o644},
	}
	for _, f := range files {
		p := filepath.Join(root, f.path)
		got, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s: %v", f.path, err)
			continue
		}
		if !bytes.Equal(got, f.data) {
			t.Errorf("%s: %d bytes differ from the %d expected", f.path, len(got), len(f.data))
		}
		if fi, _ := os.Stat(p); fi.Mode().Perm()&f.perm != f.perm {
			t.Errorf("%s: mode %v, want %v", f.path, fi.Mode().Perm(), f.perm)
		}
	}
	for _, d := range []string{"proc", "sys", "dev", "mnt", "tmp", "root"} {
		if fi, err := os.Stat(filepath.Join(root, d)); err != nil || !fi.IsDir() {
			t.Errorf("mount point /%s missing: %v", d, err)
		}
	}

	list, err := os.ReadFile(filepath.Join(root, "vm", "modules"))
	if err != nil {
		t.Fatal(err)
	}
	order := strings.Fields(string(list))
	for _, m := range bootModules() {
		if !slices.Contains(order, m+".ko") {
			t.Errorf("vm/modules %q lacks boot module %s", order, m)
		}
	}
	for i, name := range order {
		deps, err := moduleDepends(filepath.Join(root, "lib", "modules", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range deps {
			if j := slices.Index(order, d+".ko"); j < 0 || j > i {
				t.Errorf("vm/modules: %s needs %s loaded first; order %q", name, d, order)
			}
		}
	}
}

func mustWrite(t *testing.T, path, data string, perm os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
}
