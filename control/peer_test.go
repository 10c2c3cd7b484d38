package control

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// peerEnv names the socket a re-executed test binary dials as a client,
// reporting the outcome on stdout instead of running tests.
const peerEnv = "MEMCGD_CONTROL_TEST_PEER"

func TestMain(m *testing.M) {
	if sock := os.Getenv(peerEnv); sock != "" {
		c, err := Dial(sock)
		if err == nil {
			_, err = c.Get(context.Background(), "/a")
			c.Close()
		}
		fmt.Printf("uid %d: %v\n", os.Getuid(), err)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// nobody is the uid and gid of the unprivileged peer.
const nobody = 65534

func TestNonRootPeerRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("needs root to run a client as uid %d (euid %d)", nobody, os.Geteuid())
		}
		t.Skipf("needs root to run a client as uid %d (euid %d)", nobody, os.Geteuid())
	}
	path, logs := serve(t, newFakeBackend(t))
	runDir := filepath.Dir(path)
	top := filepath.Dir(filepath.Dir(runDir)) // t.TempDir()
	// The test binary, where uid 65534 can run it, and the directories
	// down to the socket's open to it.
	bin := filepath.Join(top, "control.test")
	copyExecutable(t, bin)
	for _, d := range []string{filepath.Dir(top), top, filepath.Dir(runDir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		open    func(t *testing.T) // opens the socket further
		wantOut string
		logged  bool
	}{
		{
			name:    "the directory's 0700 keeps the peer from the socket",
			open:    func(*testing.T) {},
			wantOut: "permission denied: memcgd's control socket is root's only",
		},
		{
			name: "SO_PEERCRED refuses the peer when the modes would let it in",
			open: func(t *testing.T) {
				for p, mode := range map[string]os.FileMode{runDir: 0o755, path: 0o666} {
					if err := os.Chmod(p, mode); err != nil {
						t.Fatal(err)
					}
				}
			},
			wantOut: fmt.Sprintf("permission denied: uid %d: memcgd's control socket takes requests from root only", nobody),
			logged:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.open(t)
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), peerEnv+"="+path)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("client as uid %d: %v\n%s", nobody, err, out)
			}
			if !strings.HasPrefix(string(out), fmt.Sprintf("uid %d: ", nobody)) || !strings.Contains(string(out), tt.wantOut) {
				t.Errorf("client as uid %d got %q, want %q", nobody, out, tt.wantOut)
			}
			if got := strings.Contains(logs.String(), fmt.Sprintf("refused a peer that is not root\" peer.pid=%d peer.uid=%d", cmd.Process.Pid, nobody)); got != tt.logged {
				t.Errorf("refusal of pid %d logged %v, want %v:\n%s", cmd.Process.Pid, got, tt.logged, logs)
			}
		})
	}
}

// copyExecutable copies the running test binary to dst, mode 0755.
func copyExecutable(t *testing.T, dst string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
