package watch_test

import (
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/watch"
	"github.com/memcgd/memcgd/host"
)

// issue 9, defect 5: the kernel refusing a cgroup's PSI trigger (EINVAL
// for a 1 s window without CAP_SYS_RESOURCE on Linux 6.5+, EPERM, EACCES)
// degrades that cgroup's watch to memory.events.local and the usage poll;
// it fails neither that Watch nor any other, and the degraded cgroup is
// still reported when its usage crosses the threshold.
func TestWatchGoesOnWithoutARefusedPSITrigger(t *testing.T) {
	l := cgrouptest.Layout(t)
	if l.Memory.Version != layout.V2 {
		t.Skip("PSI triggers are armed on cgroup v2 only; run in the v2 VM")
	}
	for _, refusal := range []unix.Errno{unix.EINVAL, unix.EPERM, unix.EACCES} {
		t.Run(refusal.Error(), func(t *testing.T) {
			refused, armed := cgrouptest.New(t, l, 256*watchMiB), cgrouptest.New(t, l, 256*watchMiB)
			const poll = 200 * time.Millisecond
			w := newWatcher(t, l, watch.WatcherOptions{UsagePoll: poll})
			watch.RefusePSI(w, func(dir string) error {
				if dir == refused.Dir {
					return refusal
				}
				return nil
			})
			for _, c := range []*cgrouptest.Cgroup{refused, armed} {
				if err := w.Watch(c.Path, host.Wake{UsageAbove: watchUsage(t, l, c.Dir) + 8*watchMiB}); err != nil {
					t.Fatalf("Watch %s: %v", c.Path, err)
				}
			}
			if w.Len() != 2 || w.PSIRefused() != 1 {
				t.Errorf("%d watches, %d PSI triggers refused; want 2 and 1", w.Len(), w.PSIRefused())
			}
			t.Logf("refusal: %v", w.PSIRefusal())
			cgrouptest.DirtyFile(t, refused, filepath.Join(cgrouptest.DiskDir(t), "data"), 32*watchMiB)
			if !awaitReport(w, refused.Path, reportWithin(l, poll)) {
				t.Errorf("the cgroup without a PSI trigger was not reported after its usage crossed the threshold")
			}
		})
	}
}
