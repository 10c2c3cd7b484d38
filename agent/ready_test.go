package agent

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// slowListing is a host whose first listing of cgroups waits for release.
type slowListing struct {
	*fakeHost
	release chan struct{}
}

func (s slowListing) Cgroups(ctx context.Context) ([]host.Cgroup, error) {
	<-s.release
	return s.fakeHost.Cgroups(ctx)
}

// The daemon is ready (/readyz) once its first scan has listed the
// cgroups, not before: not when created, not while the listing runs.
func TestReadyAfterTheFirstScan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := slowListing{
			fakeHost: newFakeHost(map[host.Cgroup]memcg.Stat{"/": root, "/a": {Limit: 100 * mib, Usage: 10 * mib, File: 5 * mib}}),
			release:  make(chan struct{}),
		}
		a, err := New(Options{Host: h, Config: config.Default(), Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Ready(); err == nil {
			t.Error("Ready before Run = nil, want an error")
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		synctest.Wait() // Run waits in the first listing
		if err := a.Ready(); err == nil {
			t.Error("Ready during the first listing = nil, want an error")
		}
		close(h.release)
		synctest.Wait()
		if err := a.Ready(); err != nil {
			t.Errorf("Ready after the first scan = %v, want nil", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}
