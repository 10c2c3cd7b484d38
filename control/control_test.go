package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/overrides"
	"github.com/memcgd/memcgd/state"
)

// fakeBackend manages /a and /a/b, with real overrides.Overrides held in
// memory over the default knobs.
type fakeBackend struct {
	overrides *overrides.Overrides
	stats     map[host.Cgroup]memcg.Stat
}

func newFakeBackend(t testing.TB) *fakeBackend {
	o, err := overrides.Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeBackend{overrides: o, stats: map[host.Cgroup]memcg.Stat{
		"/a":   {Usage: 300 << 20, Limit: 500 << 20, File: 200 << 20, Dirty: 10 << 20},
		"/a/b": {Usage: 100 << 20, Limit: 200 << 20, File: 50 << 20, Dirty: 1 << 20, Counters: memcg.Counters{HasFailcnt: true, Failcnt: 7}},
	}}
}

func (b *fakeBackend) managed(cg host.Cgroup) error {
	if _, ok := b.stats[cg]; !ok {
		return fmt.Errorf("cgroup %s: not managed", cg)
	}
	return nil
}

func (b *fakeBackend) Set(cg host.Cgroup, knobs map[string]string) error {
	if err := b.managed(cg); err != nil {
		return err
	}
	return b.overrides.Set(cg, knobs)
}

func (b *fakeBackend) Get(cg host.Cgroup) (GetResult, error) {
	if err := b.managed(cg); err != nil {
		return GetResult{}, err
	}
	return state.NewSettings(cg, b.effective(cg), b.overrides.Get(cg)), nil
}

func (b *fakeBackend) effective(cg host.Cgroup) memcg.Effective {
	k := b.overrides.Apply(cg, memcg.DefaultKnobs())
	return memcg.Resolve([]memcg.Stat{b.stats[cg]}, []memcg.Knobs{k})
}

func (b *fakeBackend) Reset(cg host.Cgroup) error {
	if err := b.managed(cg); err != nil {
		return err
	}
	return b.overrides.Delete(cg)
}

func (b *fakeBackend) Status(cg host.Cgroup) ([]state.Status, error) {
	var out []state.Status
	for _, c := range slices.Sorted(func(yield func(host.Cgroup) bool) {
		for c := range b.stats {
			if !yield(c) {
				return
			}
		}
	}) {
		if cg == "" || cg == c {
			st := state.Status{
				Cgroup: c, Stat: b.stats[c], Effective: b.effective(c),
				Counters: state.Counters{ReclaimedBytes: 8 << 20, ReclaimRuns: 3, WriteOuts: 2, Pauses: 1, Paused: 150 * time.Millisecond,
					Paces: 4, PacedTime: 2500 * time.Millisecond},
				Managed: true, State: state.StatePaced, Since: time.Date(2026, 12, 1, 17, 22, 54, 123456789, time.Local),
				DryRun: true, DirtyRate: 300 << 20, WriteBandwidth: 90 << 20,
			}
			if c == "/a" {
				// A cgroup the config does not manage: no state.
				st.Managed, st.Unmanaged, st.State, st.Since = false, "it is outside manage.under (/x)", "", time.Time{}
			}
			out = append(out, st)
		}
	}
	if len(out) == 0 {
		return nil, b.managed(cg)
	}
	return out, nil
}

// serve starts a server with b on a socket in a new directory and returns
// the socket's path and the server's log.
func serve(t testing.TB, b Backend) (string, *syncBuffer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run", "memcgd", "control.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	s := &Server{Backend: b, Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return path, logs
}

func dial(t *testing.T, path string) *Client {
	t.Helper()
	c, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestRoundTrip(t *testing.T) {
	b := newFakeBackend(t)
	path, logs := serve(t, b)
	c := dial(t, path) // one connection carries every request
	ctx := context.Background()

	steps := []struct {
		name      string
		do        func() (GetResult, error)
		overrides map[string]string
	}{
		{"get before any set", func() (GetResult, error) { return c.Get(ctx, "/a") }, map[string]string{}},
		{"set dirty_bytes", func() (GetResult, error) { return c.Set(ctx, "/a", map[string]string{"dirty_bytes": "16M"}) },
			map[string]string{"dirty_bytes": "16777216"}},
		{"get after set", func() (GetResult, error) { return c.Get(ctx, "/a") }, map[string]string{"dirty_bytes": "16777216"}},
		{"set the ratio twin", func() (GetResult, error) {
			return c.Set(ctx, "/a", map[string]string{"dirty_ratio": "30", "min_free_kbytes": "0"})
		}, map[string]string{"dirty_ratio": "30", "min_free_kbytes": "0"}},
		{"reset", func() (GetResult, error) { return c.Reset(ctx, "/a") }, map[string]string{}},
	}
	for _, s := range steps {
		got, err := s.do()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		// What the client gets is what the backend holds, thresholds
		// and watermarks included.
		want, err := b.Get("/a")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: client got %+v\nbackend has %+v", s.name, got, want)
		}
		if !reflect.DeepEqual(got.Overrides, s.overrides) {
			t.Errorf("%s: overrides %v, want %v", s.name, got.Overrides, s.overrides)
		}
	}
	if !strings.Contains(logs.String(), "knobs set") || !strings.Contains(logs.String(), "overrides reset") {
		t.Errorf("changes not logged:\n%s", logs)
	}

	for _, cg := range []host.Cgroup{"", "/a/b"} {
		got, err := c.Stat(ctx, cg)
		if err != nil {
			t.Fatal(err)
		}
		sts, err := b.Status(cg)
		if err != nil {
			t.Fatal(err)
		}
		var want []Report
		for _, st := range sts {
			want = append(want, NewReport(st))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Stat(%q) = %+v\nwant state.Status.Fields %+v", cg, got, want)
		}
	}
}

func TestErrorsComeBack(t *testing.T) {
	path, _ := serve(t, newFakeBackend(t))
	c := dial(t, path)
	ctx := context.Background()
	tests := []struct {
		name    string
		do      func() error
		knob    *memcg.KnobError        // the *memcg.KnobError the client rebuilds, if any
		unknown *memcg.UnknownKnobError // the *memcg.UnknownKnobError the client rebuilds, if any
		errHas  []string
	}{
		{
			name: "value out of range",
			do:   func() error { _, err := c.Set(ctx, "/a", map[string]string{"dirty_ratio": "200"}); return err },
			knob: &memcg.KnobError{Knob: "dirty_ratio", Value: "200", Allowed: "an integer percentage from 0 to 100"},
		},
		{
			name: "both halves of a pair",
			do: func() error {
				_, err := c.Set(ctx, "/a", map[string]string{"dirty_ratio": "20", "dirty_bytes": "16M"})
				return err
			},
			knob: &memcg.KnobError{Knob: "dirty_bytes", Value: "16M", Allowed: "only one of dirty_ratio and dirty_bytes at a time: setting one zeroes the other"},
		},
		{
			name:    "unknown knob",
			do:      func() error { _, err := c.Set(ctx, "/a", map[string]string{"dirty_expire": "1"}); return err },
			unknown: &memcg.UnknownKnobError{Knob: "dirty_expire"},
		},
		{
			name:   "no knobs",
			do:     func() error { _, err := c.Set(ctx, "/a", nil); return err },
			errHas: []string{"knobs: missing"},
		},
		{
			name:   "relative cgroup",
			do:     func() error { _, err := c.Get(ctx, "a"); return err },
			errHas: []string{"cgroup", `"a"`, "clean hierarchy path"},
		},
		{
			name:   "get needs a cgroup",
			do:     func() error { _, err := c.Get(ctx, ""); return err },
			errHas: []string{"cgroup", `""`},
		},
		{
			name:   "the backend's own error",
			do:     func() error { _, err := c.Stat(ctx, "/x"); return err },
			errHas: []string{"cgroup /x: not managed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			if err == nil {
				t.Fatal("no error")
			}
			if tt.knob != nil {
				var ke *memcg.KnobError
				if !errors.As(err, &ke) || *ke != *tt.knob {
					t.Fatalf("error %v (%T), want the *memcg.KnobError %+v", err, err, tt.knob)
				}
				return
			}
			if tt.unknown != nil {
				var ue *memcg.UnknownKnobError
				if !errors.As(err, &ue) || *ue != *tt.unknown {
					t.Fatalf("error %v (%T), want the *memcg.UnknownKnobError %+v", err, err, tt.unknown)
				}
				return
			}
			for _, s := range tt.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
	// The connection survives refused requests.
	if _, err := c.Get(ctx, "/a"); err != nil {
		t.Errorf("get after errors: %v", err)
	}
}

func TestMalformedRequests(t *testing.T) {
	path, _ := serve(t, newFakeBackend(t))
	tests := []struct {
		line   string
		errHas string
	}{
		{`{"op":"get","cgroup":"/a"`, "unexpected EOF"},
		{`not json`, "invalid character"},
		{`{"op":"get","cgroup":"/a","verbose":true}`, `unknown field "verbose"`},
		{`{"op":"get","cgroup":"/a"} {"op":"get"}`, "data after the object"},
		{`{"op":"delete","cgroup":"/a"}`, `op: invalid value "delete": allowed set, get, reset or stat`},
		{`{"op":"get","cgroup":"/a","knobs":{"dirty_ratio":"1"}}`, `knobs: not allowed with op "get"`},
		{`{"op":"set","cgroup":"/a","knobs":{"dirty_ratio":15}}`, "cannot unmarshal number"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			resp := exchange(t, path, tt.line+"\n")
			if !strings.Contains(resp.Error, tt.errHas) || resp.Settings != nil {
				t.Errorf("response %+v, want only an error mentioning %q", resp, tt.errHas)
			}
		})
	}
}

func TestOversizedRequest(t *testing.T) {
	path, logs := serve(t, newFakeBackend(t))
	huge := `{"op":"set","cgroup":"/a","knobs":{"dirty_ratio":"` + strings.Repeat("1", MaxRequestSize) + `"}}` + "\n"
	resp := exchange(t, path, huge)
	if want := fmt.Sprintf("longer than %d bytes", MaxRequestSize); !strings.Contains(resp.Error, want) {
		t.Errorf("response %+v, want an error mentioning %q", resp, want)
	}
	if !strings.Contains(logs.String(), "oversized request") {
		t.Errorf("oversized request not logged:\n%s", logs)
	}
}

// exchange writes raw bytes on a new connection and returns the first
// response.
func exchange(t *testing.T, path, raw string) response {
	t.Helper()
	line := exchangeLine(t, path, raw)
	var r response
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("response %q to %.80q: %v", line, raw, err)
	}
	return r
}

// exchangeLine writes raw bytes on a new connection and returns the first
// response line as sent.
func exchangeLine(t *testing.T, path, raw string) string {
	t.Helper()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	// The server may stop reading an oversized request and close: write
	// beside reading, and ignore the broken pipe.
	go conn.Write([]byte(raw))
	var resp []byte
	buf := make([]byte, 4096)
	for !strings.Contains(string(resp), "\n") {
		n, err := conn.Read(buf)
		resp = append(resp, buf[:n]...)
		if err != nil {
			break
		}
	}
	line, _, _ := strings.Cut(string(resp), "\n")
	return line
}

// The replies carry values with the JSON types memcgd stat --json and get
// --json print: sizes as numbers of bytes, null for no limit, booleans
// for flags, knobs typed as memcg.KnobValue types them. The request's
// knobs stay strings, as the user wrote them ("16M").
func TestRepliesAreTyped(t *testing.T) {
	b := newFakeBackend(t)
	b.stats["/u"] = memcg.Stat{Usage: 4096, Limit: memcg.NoLimit}
	path, _ := serve(t, b)
	var settings struct {
		Settings struct {
			Knobs     map[string]any `json:"knobs"`
			Overrides map[string]any `json:"overrides"`
		} `json:"settings"`
	}
	line := exchangeLine(t, path, `{"op":"set","cgroup":"/a","knobs":{"dirty_bytes":"16M","writeback_first":"0"}}`+"\n")
	if err := json.Unmarshal([]byte(line), &settings); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	wantKnobs := map[string]any{
		"dirty_ratio": 0.0, "dirty_bytes": float64(16 << 20), "dirty_background_ratio": 10.0,
		"dirty_background_bytes": 0.0, "min_free_kbytes": "auto", "writeback_first": false,
	}
	if !reflect.DeepEqual(settings.Settings.Knobs, wantKnobs) {
		t.Errorf("knobs %v, want %v\n%s", settings.Settings.Knobs, wantKnobs, line)
	}
	if want := map[string]any{"dirty_bytes": float64(16 << 20), "writeback_first": false}; !reflect.DeepEqual(settings.Settings.Overrides, want) {
		t.Errorf("overrides %v, want %v", settings.Settings.Overrides, want)
	}

	var stat struct {
		Stat struct {
			Cgroup string `json:"cgroup"`
			Names  []string
			Kinds  string
			Values []any
		} `json:"stat"`
	}
	line = exchangeLine(t, path, `{"op":"stat","cgroup":"/u"}`+"\n")
	if err := json.Unmarshal([]byte(line), &stat); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	got := map[string]any{}
	for i, n := range stat.Stat.Names {
		got[n] = stat.Stat.Values[i]
	}
	for name, want := range map[string]any{"usage": 4096.0, "limit": nil, "writeback_first": true, "throttle_available": true, "exempt": false, "dirty_bytes": 0.0} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("stat %s = %#v, want %#v\n%s", name, v, want, line)
		}
	}
	if len(stat.Stat.Kinds) != len(stat.Stat.Names) || !strings.HasPrefix(stat.Stat.Kinds, "bb") {
		t.Errorf("kinds %q for names %v", stat.Stat.Kinds, stat.Stat.Names)
	}

	// The client reads them back.
	c := dial(t, path)
	reps, err := c.Stat(context.Background(), "/u")
	if err != nil || len(reps) != 1 {
		t.Fatalf("Stat = %v, %v", reps, err)
	}
	for _, f := range reps[0].Fields {
		switch f.Name {
		case "limit":
			if f.Value != memcg.NoLimit || f.Kind != memcg.KindBytes || f.Text() != "max" {
				t.Errorf("limit = %+v, want no limit", f)
			}
		case "writeback_first":
			if f.Kind != memcg.KindFlag || f.Text() != "true" {
				t.Errorf("writeback_first = %+v, want the flag true", f)
			}
		}
	}
	s, err := c.Get(context.Background(), "/a")
	if err != nil || s.Knobs["writeback_first"] != "false" || s.Knobs["dirty_bytes"] != "16777216" || s.Knobs["min_free_kbytes"] != "auto" {
		t.Errorf("Get = %+v, %v; want the knobs in their text form", s, err)
	}
}

// A report whose values do not fit their kinds is refused, not misread.
func TestReportKindsChecked(t *testing.T) {
	for _, w := range []wireReport{
		{Cgroup: "/a", Names: []string{"limit"}, Kinds: "b", Values: valueList{{kind: valueTrue}}},
		{Cgroup: "/a", Names: []string{"exempt"}, Kinds: "f", Values: valueList{{n: 1}}},
		{Cgroup: "/a", Names: []string{"pgrefill"}, Kinds: "n", Values: valueList{{kind: valueNull}}},
		{Cgroup: "/a", Names: []string{"a", "b"}, Kinds: "n", Values: valueList{{n: 1}, {n: 2}}},
	} {
		var last fieldNames
		if r, err := w.report(&last); err == nil {
			t.Errorf("report of %+v = %+v, want an error", w, r)
		}
	}
}

func TestServeStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&Server{Backend: newFakeBackend(t)}).Serve(ctx, ln) }()
	idle := dial(t, path) // an open connection does not hold up the stop
	if _, err := idle.Get(context.Background(), "/a"); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after cancel = %v, want nil", err)
		}
	case <-time.After(ReadTimeout / 2):
		t.Fatal("Serve still running after its context was cancelled")
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file after stop: %v, want it removed", err)
	}
	if _, err := Dial(path); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Dial after stop = %v, want ErrNotRunning", err)
	}
}

// syncBuffer is a log sink the server's goroutines share with the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// BenchmarkGet is one get round trip on an open connection.
func BenchmarkGet(b *testing.B) {
	path, _ := serve(b, newFakeBackend(b))
	c, err := Dial(path)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for b.Loop() {
		if _, err := c.Get(context.Background(), "/a"); err != nil {
			b.Fatal(err)
		}
	}
}
