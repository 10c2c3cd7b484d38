package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/metrics"
	"github.com/memcgd/memcgd/state"
)

// configMapVolume is a directory laid out as kubelet lays out a ConfigMap
// volume (pkg/volume/util/atomic_writer.go):
//
//	..2026_12_01_15_00_01.000000001/config.yaml  the payload
//	..data -> ..2026_12_01_15_00_01.000000001
//	config.yaml -> ..data/config.yaml
//
// An update writes a new timestamped directory, points a ..data_tmp
// symlink at it, renames that over ..data (the atomic swap), and removes
// the old directory; config.yaml, the path the daemon reads, never
// changes.
type configMapVolume struct {
	dir     string
	n       int
	payload string // the timestamped directory ..data points at
}

func newConfigMapVolume(t *testing.T, content string) *configMapVolume {
	t.Helper()
	v := &configMapVolume{dir: t.TempDir()}
	v.update(t, content)
	if err := os.Symlink(filepath.Join("..data", "config.yaml"), v.path()); err != nil {
		t.Fatal(err)
	}
	return v
}

// path is the config file as the container sees it.
func (v *configMapVolume) path() string { return filepath.Join(v.dir, "config.yaml") }

// update swaps in content as kubelet does.
func (v *configMapVolume) update(t *testing.T, content string) {
	t.Helper()
	v.n++
	payload := fmt.Sprintf("..2026_12_01_15_00_%02d.%09d", v.n, v.n)
	if err := os.Mkdir(filepath.Join(v.dir, payload), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v.dir, payload, "config.yaml"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(payload, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if v.payload != "" {
		if err := os.RemoveAll(filepath.Join(v.dir, v.payload)); err != nil {
			t.Fatal(err)
		}
	}
	v.payload = payload
}

// unlink removes ..data, as no kubelet does but a broken volume might:
// config.yaml then dangles.
func (v *configMapVolume) unlink(t *testing.T) {
	t.Helper()
	if err := os.Remove(filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a log sink safe for the watcher and the test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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

func configYAML(under string, ratio int) string {
	return fmt.Sprintf("version: 1\nmanage: {under: %s, limited_only: true}\ndefaults: {dirty_ratio: %d}\n", under, ratio)
}

// The watch reports each change of the file's content, through kubelet's
// symlink swap, once: not a swap to the same content, not an unreadable
// file (logged once), not the ticks in between.
func TestWatchConfigFollowsAConfigMapVolume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := configYAML("/kubepods", 10), configYAML("/kubepods", 20)
		v := newConfigMapVolume(t, a)
		var log syncBuffer
		changed := make(chan struct{}, 1)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go watchConfig(ctx, v.path(), []byte(a), DefaultConfigCheck, slog.New(slog.NewTextHandler(&log, nil)), changed)

		steps := []struct {
			name    string
			do      func()
			reports int
		}{
			{"started: the content loaded", func() {}, 0},
			{"swapped to new content", func() { v.update(t, b) }, 1},
			{"nothing changed", func() {}, 0},
			{"swapped to the same content", func() { v.update(t, b) }, 0},
			{"swapped to a bad config: the reload decides", func() { v.update(t, "version: 2\n") }, 1},
			{"..data gone: unreadable", func() { v.unlink(t) }, 0},
			{"still unreadable", func() {}, 0},
			{"back, with the first content", func() { v.update(t, a) }, 1},
		}
		for _, s := range steps {
			s.do()
			time.Sleep(DefaultConfigCheck) // the fake clock: one check
			synctest.Wait()
			got := 0
			select {
			case <-changed:
				got = 1
			default:
			}
			if got != s.reports {
				t.Errorf("%s: %d reports, want %d", s.name, got, s.reports)
			}
		}
		if n := strings.Count(log.String(), "cannot read the config file"); n != 1 {
			t.Errorf("%d warnings of an unreadable file, want 1:\n%s", n, log.String())
		}
	})
}

// A ConfigMap update reloads the config as SIGHUP does: a good one is put
// in force, a bad one or one that moves manage.under is refused and
// logged, the running one kept; the metrics count each.
func TestConfigMapUpdateReloadsAsSIGHUPDoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := configYAML("/kubepods", 10)
		v := newConfigMapVolume(t, first)
		path := v.path()
		cfg, loaded, err := readConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		var log syncBuffer
		logger := slog.New(slog.NewTextHandler(&log, nil))
		var mu sync.Mutex
		var applied []*config.Config
		reloads := metrics.NewConfigReloads(time.Now())
		r := &reloader{
			load: func() (*config.Config, error) { return loadConfig(path) }, running: cfg, reloads: reloads, log: logger, path: path, now: time.Now,
			apply: func(c *config.Config) { mu.Lock(); applied = append(applied, c); mu.Unlock() },
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		changed := make(chan struct{}, 1)
		go watchConfig(ctx, v.path(), loaded, DefaultConfigCheck, logger, changed)
		go reloadLoop(ctx, nil, changed, r)

		reg, err := metrics.NewRegistry(func() []state.Status { return nil }, metrics.WithConfigReloads(reloads))
		if err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			name       string
			content    string
			ratio      uint64 // the dirty_ratio in force after the step
			logHas     string
			successes  int
			failures   int
			successful int
		}{
			{"a good config", configYAML("/kubepods", 20), 20, `msg="config reloaded" trigger="config file changed"`, 1, 0, 1},
			{"a bad config", "version: 1\ndefaults: {dirty_ratio: 101}\n", 20, `msg="config reload refused; keeping the running config" trigger="config file changed"`, 1, 1, 0},
			{"manage.under moved", configYAML("/system.slice", 30), 20, "manage.under: changed from /kubepods to /system.slice", 1, 2, 0},
			{"good again", configYAML("/kubepods", 15), 15, `msg="config reloaded"`, 2, 2, 1},
		}
		for _, s := range steps {
			v.update(t, s.content)
			time.Sleep(DefaultConfigCheck)
			synctest.Wait()
			mu.Lock()
			ratio := cfg.Defaults.DirtyRatio
			if len(applied) > 0 {
				ratio = applied[len(applied)-1].Defaults.DirtyRatio
			}
			mu.Unlock()
			if ratio != s.ratio {
				t.Errorf("%s: dirty_ratio %d in force, want %d", s.name, ratio, s.ratio)
			}
			if !strings.Contains(log.String(), s.logHas) {
				t.Errorf("%s: no %q in the log:\n%s", s.name, s.logHas, log.String())
			}
			var page bytes.Buffer
			if err := reg.WriteText(context.Background(), &page); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{
				fmt.Sprintf(`memcgd_config_reloads_total{result="success"} %d`, s.successes),
				fmt.Sprintf(`memcgd_config_reloads_total{result="failure"} %d`, s.failures),
				fmt.Sprintf("memcgd_config_last_reload_successful %d", s.successful),
			} {
				if !strings.Contains(page.String(), want+"\n") {
					t.Errorf("%s: no %q in /metrics", s.name, want)
				}
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(applied) != 2 {
			t.Errorf("%d configs put in force, want 2 (the good ones)", len(applied))
		}
	})
}
