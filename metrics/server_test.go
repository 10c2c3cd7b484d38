package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memcgd/memcgd/state"
)

func TestListenLoopbackOnly(t *testing.T) {
	tests := []struct {
		addr             string
		allowNonLoopback bool
		errHas           string // "" if the bind must succeed
	}{
		{addr: "127.0.0.1:0"},
		{addr: "127.0.0.2:0"},
		{addr: "localhost:0"},
		{addr: "0.0.0.0:0", errHas: "allowed a loopback address"},
		{addr: ":0", errHas: "allowed a loopback address"},
		{addr: "[::]:0", errHas: "allowed a loopback address"},
		{addr: "192.0.2.1:9717", errHas: "allowed a loopback address"},
		{addr: "example.com:9717", errHas: "allowed a loopback address"},
		{addr: "0.0.0.0:0", allowNonLoopback: true},
		{addr: "127.0.0.1", errHas: "allowed host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			ln, err := Listen(tt.addr, tt.allowNonLoopback)
			if tt.errHas == "" {
				if err != nil {
					t.Fatal(err)
				}
				ln.Close()
				return
			}
			if err == nil {
				ln.Close()
				t.Fatalf("Listen(%q) bound %s, want an error", tt.addr, ln.Addr())
			}
			if !strings.Contains(err.Error(), tt.errHas) || !strings.Contains(err.Error(), tt.addr) {
				t.Errorf("error %q, want it to name %q and say %q", err, tt.addr, tt.errHas)
			}
		})
	}
}

func TestServe(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	sts := snapshot(t)
	reg, err := NewRegistry(func() []state.Status { return sts })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, Handler(reg, nil), ServerOptions{}) }()

	base := "http://" + ln.Addr().String()
	tests := []struct {
		method, path string
		code         int
		bodyHas      string
	}{
		{http.MethodGet, "/metrics", http.StatusOK, `memcgd_cgroup_usage_bytes{cgroup="/kubepods/burstable/pod-db"}`},
		{http.MethodGet, "/metrics", http.StatusOK, "go_goroutines"},
		{http.MethodGet, "/metrics", http.StatusOK, "process_resident_memory_bytes"},
		{http.MethodPost, "/metrics", http.StatusMethodNotAllowed, ""},
		{http.MethodGet, "/healthz", http.StatusOK, "ok\n"},
		{http.MethodGet, "/readyz", http.StatusOK, "ok\n"}, // no Ready: always ready
		{http.MethodGet, "/", http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, base+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.bodyHas) {
			t.Errorf("%s %s: %d, want %d with %q", tt.method, tt.path, resp.StatusCode, tt.code, tt.bodyHas)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after cancel = %v, want nil", err)
		}
	case <-time.After(shutdownTimeout + time.Second):
		t.Fatal("Serve still running after its context was cancelled")
	}
	if _, err := http.Get(base + "/metrics"); err == nil {
		t.Error("endpoint still answers after Serve returned")
	}
}

// /readyz answers as the Ready func says, 200 or 503 with its reason, and
// /healthz stays 200 meanwhile: a daemon still starting is alive.
func TestServeReadyz(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistry(func() []state.Status { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var readyErr error
	ready := func() error {
		mu.Lock()
		defer mu.Unlock()
		return readyErr
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, Handler(reg, nil), ServerOptions{Ready: ready}) }()
	defer func() {
		cancel()
		<-done
	}()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	tests := []struct {
		name       string
		err        error
		code       int
		body       string
		healthCode int
	}{
		{"not ready", errors.New("the first scan of the managed cgroups has not finished"), http.StatusServiceUnavailable,
			"not ready: the first scan of the managed cgroups has not finished\n", http.StatusOK},
		{"ready", nil, http.StatusOK, "ok\n", http.StatusOK},
		{"not ready again", errors.New("reason two"), http.StatusServiceUnavailable, "not ready: reason two\n", http.StatusOK},
	}
	for _, tt := range tests {
		mu.Lock()
		readyErr = tt.err
		mu.Unlock()
		if code, body := get("/readyz"); code != tt.code || body != tt.body {
			t.Errorf("%s: GET /readyz = %d %q, want %d %q", tt.name, code, body, tt.code, tt.body)
		}
		if code, _ := get("/healthz"); code != tt.healthCode {
			t.Errorf("%s: GET /healthz = %d, want %d", tt.name, code, tt.healthCode)
		}
	}
}
