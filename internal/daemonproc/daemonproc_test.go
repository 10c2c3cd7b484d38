package daemonproc

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memcgd/memcgd/control"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/state"
)

// fakeEnv makes the test binary, run as "BIN run --config ...", a fake
// memcgd: it serves a control socket that reports on one cgroup, /a, and
// a metrics listener with /readyz, and obeys its config, a list of words:
// "exit N" exits with status N at once, "unready" answers /readyz 503,
// "deaf" ignores SIGTERM. It writes its PID into the file "pid" beside
// its config.
const fakeEnv = "MEMCGD_DAEMONPROC_FAKE"

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) == "1" && len(os.Args) > 1 && os.Args[1] == "run" {
		os.Exit(fake(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func fake(args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	cfg, socket, listen := fs.String("config", "", ""), fs.String("socket", "", ""), fs.String("listen", "", "")
	fs.String("journal", "", "")
	fs.String("overrides", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	b, err := os.ReadFile(*cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	words := string(b)
	_ = os.WriteFile(filepath.Join(filepath.Dir(*cfg), "pid"), []byte(strconv.Itoa(os.Getpid())), 0o600)
	if n, ok := strings.CutPrefix(words, "exit "); ok {
		code, _ := strconv.Atoi(strings.TrimSpace(n))
		fmt.Fprintln(os.Stderr, "fake memcgd: exiting", code)
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if strings.Contains(words, "deaf") {
		stop()
		signal.Ignore(syscall.SIGTERM)
		ctx = context.Background()
	}
	ln, err := control.Listen(*socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go (&control.Server{Backend: fakeBackend{}}).Serve(ctx, ln)
	mln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if strings.Contains(words, "unready") {
			http.Error(w, "the first scan is not done", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "memcgd_up 1") })
	go http.Serve(mln, mux)
	fmt.Fprintln(os.Stderr, "fake memcgd running")
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "fake memcgd stopped")
	return 0
}

type fakeBackend struct{}

func (fakeBackend) Set(host.Cgroup, map[string]string) error   { return nil }
func (fakeBackend) Get(host.Cgroup) (control.GetResult, error) { return control.GetResult{}, nil }
func (fakeBackend) Reset(host.Cgroup) error                    { return nil }
func (fakeBackend) Status(cg host.Cgroup) ([]state.Status, error) {
	if cg != "" && cg != "/a" {
		return nil, fmt.Errorf("%s is not managed", cg)
	}
	st := state.Status{Cgroup: "/a"}
	st.Stat.Usage, st.Stat.Limit, st.Counters.Pauses = 4096, 1<<30, 3
	return []state.Status{st}, nil
}

// newFake prepares a fake daemon with config cfg in a temporary directory.
func newFake(t *testing.T, cfg string) *Daemon {
	t.Helper()
	t.Setenv(fakeEnv, "1")
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(bin, t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if d.Running() {
			_ = d.Signal(syscall.SIGKILL)
			<-d.Exited()
		}
	})
	return d
}

func ctxWithin(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// Start returns once the daemon is ready; Stat and Count see what it
// reports, Metrics its page; Stop sends SIGTERM and sees status 0; a
// second Launch appends to the same log.
func TestStartProbeStopAndStartAgain(t *testing.T) {
	d := newFake(t, "")
	for run := 1; run <= 2; run++ {
		if err := d.Start(ctxWithin(t, 10*time.Second)); err != nil {
			t.Fatalf("run %d: Start: %v", run, err)
		}
		st, err := d.Stat(t.Context(), "/a")
		if err != nil {
			t.Fatalf("run %d: Stat: %v", run, err)
		}
		if st["usage"] != 4096 || st["limit"] != 1<<30 || st["throttle_pauses"] != 3 || st["throttle_available"] != 1 {
			t.Errorf("run %d: Stat = %v, want usage 4096, limit 1 GiB, throttle_pauses 3, throttle_available 1", run, st)
		}
		if _, err := d.Stat(t.Context(), "/b"); err == nil {
			t.Errorf("run %d: Stat of a cgroup the daemon does not report on: no error", run)
		}
		if n, err := d.Count(t.Context()); err != nil || n != 1 {
			t.Errorf("run %d: Count = %d, %v; want 1", run, n, err)
		}
		if page, err := d.Metrics(t.Context()); err != nil || !strings.Contains(page, "memcgd_up 1") {
			t.Errorf("run %d: Metrics = %q, %v", run, page, err)
		}
		if err := d.Stop(10 * time.Second); err != nil {
			t.Fatalf("run %d: Stop: %v", run, err)
		}
		if d.Running() {
			t.Errorf("run %d: Running after Stop", run)
		}
		if ps, life := d.ProcessState(); ps == nil || !ps.Success() || life <= 0 {
			t.Errorf("run %d: ProcessState = %v, %v; want a success and a lifetime", run, ps, life)
		}
	}
	log, err := d.LogText()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(log, "fake memcgd stopped"); n != 2 {
		t.Errorf("the log holds %d stops, want both runs':\n%s", n, log)
	}
}

// A daemon that exits at start fails Await at once, with its status and
// log; one that never becomes ready fails it at the context's end.
func TestAwaitFailsWhenTheDaemonExitsOrIsNotReady(t *testing.T) {
	d := newFake(t, "exit 3")
	start := time.Now()
	err := d.Start(ctxWithin(t, time.Minute))
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "fake memcgd: exiting 3") {
		t.Errorf("Start of a daemon that exits: %v, want its exit status and log", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("Start took %v to see the exit, want it at once", took)
	}
	var ee *exec.ExitError
	if !errors.As(d.ExitErr(), &ee) || ee.ExitCode() != 3 {
		t.Errorf("ExitErr = %v, want exit status 3", d.ExitErr())
	}

	d = newFake(t, "unready")
	if err := d.Launch(); err != nil {
		t.Fatal(err)
	}
	// Once the daemon answers at all, Ready says why it is not ready.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := d.Ready(t.Context())
		if err != nil && strings.Contains(err.Error(), "503") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Ready of a daemon whose /readyz says 503: %v after 10 s, want an error with the 503", err)
		}
	}
	err = d.Await(ctxWithin(t, time.Second))
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("Await of a daemon whose /readyz says 503: %v, want an error with the 503", err)
	}
	if !d.Running() {
		t.Errorf("the unready daemon exited: %v", d.ExitErr())
	}
}

// A daemon that ignores SIGTERM is killed at Stop's timeout, and Stop
// says so; Kill sees the SIGKILL.
func TestStopKillsADaemonThatDoesNotExit(t *testing.T) {
	d := newFake(t, "deaf")
	if err := d.Start(ctxWithin(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	err := d.Stop(200 * time.Millisecond)
	if !errors.Is(err, ErrRunning) || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Stop of a daemon that ignores SIGTERM: %v, want ErrRunning and killed", err)
	}
	if d.Running() {
		t.Error("still running after Stop")
	}

	d = newFake(t, "")
	if err := d.Start(ctxWithin(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(50 * time.Millisecond); !errors.Is(err, ErrRunning) {
		t.Errorf("Wait on a running daemon = %v, want ErrRunning", err)
	}
	if err := d.Kill(10 * time.Second); err != nil {
		t.Errorf("Kill: %v", err)
	}
	if err := d.Stop(time.Second); err == nil {
		t.Error("Stop of a killed daemon: no error, want the SIGKILL reported")
	}
}

// With Join the daemon starts inside the directories (a join writes its
// PID into each one's cgroup.procs, here plain files); with Wrap it runs
// under the wrapper, which executes it: the PID is the daemon's.
func TestJoinAndWrapKeepTheDaemonsPID(t *testing.T) {
	d := newFake(t, "")
	dirs := []string{t.TempDir(), t.TempDir()}
	d.Join, d.Wrap = dirs, []string{"env", "WRAPPED=1"}
	if err := d.Start(ctxWithin(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(d.PID())
	b, err := os.ReadFile(filepath.Join(filepath.Dir(d.Config), "pid"))
	if err != nil || string(b) != pid {
		t.Errorf("the daemon's own PID %q (%v), want %s, the process started", b, err, pid)
	}
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil || strings.TrimSpace(string(b)) != pid {
			t.Errorf("%s/cgroup.procs = %q (%v), want %s", dir, b, err, pid)
		}
	}
	if env, err := os.ReadFile("/proc/" + pid + "/environ"); err != nil || !strings.Contains(string(env), "WRAPPED=1") {
		t.Errorf("the daemon's environment lacks the wrapper's WRAPPED=1 (%v)", err)
	}
	if err := d.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestTail(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\n", 5, "a"},
		{"", 3, ""},
	} {
		if got := Tail(tt.in, tt.n); got != tt.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
