package dirtytrack_test

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/dirtytrack"
	"github.com/memcgd/memcgd/internal/stats"
	"golang.org/x/sys/unix"
)

var (
	measure      = flag.Bool("measure", false, "run TestMeasureOverhead: the tracker's cost to a 4 KiB writer, printed as a table")
	measurePairs = flag.Int("measure.pairs", 5, "tracker off/on pairs for -measure")
	measureMiB   = flag.Int("measure.mib", 1024, "MiB each writer run writes for -measure")
	measureRT    = flag.Bool("measure.runtime", false, "with -measure, enable BPF run-time statistics (BPF_ENABLE_STATS, reverted when its fd closes) during each tracker-on run, for the program's own time per folio")
)

// TestMeasureOverhead measures what the tracker adds to a writer's system
// time: a process in a test cgroup writes -measure.mib MiB in 4 KiB writes
// to a new file (which stays in the page cache: the cgroup's limit is
// above it and the file is deleted, dirty, after each run), with the
// tracker off and on in ABBA order, after one discarded warm-up run. With the
// tracker on, the cgroup is watched with a wake-up re-armed every 4 MiB, as
// the daemon would. It prints each pair, the medians, the per-folio cost,
// the wake-up latency, the load time and the maps' memory. Run it alone:
//
//	go test ./cgroupfs/dirtytrack -run TestMeasureOverhead -measure -v
func TestMeasureOverhead(t *testing.T) {
	if !*measure {
		t.Skip("measurement; run with -measure")
	}
	l := cgrouptest.Layout(t)
	dir := diskDir(t)
	size := int64(*measureMiB) * mib
	c := cgrouptest.New(t, l, uint64(size)+512*mib)
	id := cgroupID(t, c)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	type run struct {
		sys, wall time.Duration
		wakes     int
		runs      uint64
		runtime   time.Duration
		load      time.Duration
		mapBytes  uint64
		dropped   uint64
	}
	// lat collects, over all runs, the time from the folio that passed a
	// threshold to the receipt of its wake-up.
	var lat []time.Duration
	// write runs the writer once; with on, under a tracker loaded for
	// this run and closed before it returns.
	write := func(on bool) run {
		var tr *dirtytrack.Tracker
		stop := make(chan struct{})
		wakes := make(chan int, 1)
		if on {
			tr = load(t)
			if err := tr.Watch(id, 4*mib); err != nil {
				t.Fatal(err)
			}
			go func() {
				n := 0
				defer func() { wakes <- n }()
				for {
					select {
					case ev := <-tr.Events():
						if ev.Kind == dirtytrack.Wake && ev.ID == id {
							lat = append(lat, dirtytrack.MonotonicNow()-ev.Time)
							n++
							if err := tr.Watch(id, ev.Dirtied+4*mib); err != nil {
								t.Error(err)
								return
							}
						}
					case <-stop:
						return
					}
				}
			}()
		}
		var stats io.Closer
		if on && *measureRT {
			var err error
			if stats, err = ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err != nil {
				t.Fatalf("enable BPF run-time statistics: %v", err)
			}
		}
		data := filepath.Join(dir, "data")
		start := time.Now()
		w := c.Start(t, self, "-test.run=^TestHelperWriter$", "--", data, strconv.FormatInt(size/(4*kib), 10), filepath.Join(dir, "stamps"))
		if err := w.Wait(); err != nil {
			t.Fatalf("writer: %v (stderr %q)", err, w.Stderr)
		}
		r := run{wall: time.Since(start), sys: w.ProcessState.SystemTime()}
		if on {
			close(stop)
			r.wakes = <-wakes
			runs, total, err := tr.FolioProgramStats()
			if err != nil {
				t.Fatal(err)
			}
			r.runs, r.runtime = runs, total
			st, err := tr.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if r.mapBytes, err = tr.MapBytes(); err != nil {
				t.Fatal(err)
			}
			r.dropped, r.load = st.Dropped, tr.LoadTime()
			tr.Close()
		}
		if stats != nil {
			stats.Close()
		}
		// Deleting the file drops its dirty pages without writing them.
		if err := os.Remove(data); err != nil {
			t.Fatal(err)
		}
		return r
	}

	write(false) // warm-up
	var off, on []time.Duration
	var rows []string
	var loads []time.Duration
	var mapBytes uint64
	var perFolio []time.Duration
	for i := range *measurePairs {
		// ABBA order, each run after a pause: the run after a load or
		// after deleting a dirty file does not always come second.
		var a, b run
		if i%2 == 0 {
			time.Sleep(settlePause)
			a = write(false)
			time.Sleep(settlePause)
			b = write(true)
		} else {
			time.Sleep(settlePause)
			b = write(true)
			time.Sleep(settlePause)
			a = write(false)
		}
		loads = append(loads, b.load)
		mapBytes = b.mapBytes
		off, on = append(off, a.sys), append(on, b.sys)
		if b.runs > 0 {
			perFolio = append(perFolio, b.runtime/time.Duration(b.runs))
		}
		rows = append(rows, fmt.Sprintf("| %d | %.3f s | %.3f s | %+.1f %% | %.0f MB/s | %.0f MB/s | %d | %d |", i+1,
			a.sys.Seconds(), b.sys.Seconds(), 100*(b.sys.Seconds()/a.sys.Seconds()-1),
			float64(size)/a.wall.Seconds()/1e6, float64(size)/b.wall.Seconds()/1e6, b.wakes, b.dropped))
	}
	mOff, mOn := median(off), median(on)
	var diffs []time.Duration
	for i := range off {
		diffs = append(diffs, on[i]-off[i])
	}
	folios := size / (4 * kib)
	t.Logf("writer: %d MiB in 4 KiB writes, %d pairs, kernel %s", size/mib, *measurePairs, kernelRelease())
	t.Logf("\n| pair | sys off | sys on | on vs off | MB/s off | MB/s on | wake-ups | dropped |\n|---|---|---|---|---|---|---|---|\n%s",
		strings.Join(rows, "\n"))
	t.Logf("median sys: off %.3f s, on %.3f s (%+.1f %%); median pair difference %v = %.0f ns per 4 KiB folio",
		mOff.Seconds(), mOn.Seconds(), 100*(mOn.Seconds()/mOff.Seconds()-1), median(diffs), float64(median(diffs).Nanoseconds())/float64(folios))
	if len(perFolio) > 0 {
		t.Logf("program's own run time per dirtied folio (BPF run-time statistics): %s", distribution(perFolio))
	}
	t.Logf("wake-up latency, folio dirtied -> receipt, while the writer runs: %s", distribution(lat))
	t.Logf("load and attach: %s; maps: %.1f MiB (bpf_map_info memlock)", distribution(loads), float64(mapBytes)/mib)
}

// settlePause separates measured runs, so the truncation of the previous
// run's file and a tracker's load are over before the next writer starts.
const settlePause = time.Second

func median(d []time.Duration) time.Duration {
	return stats.Median(slices.Sorted(slices.Values(d)))
}

func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}
