package kernel_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/sim/kernel"
	"github.com/memcgd/memcgd/sim/workload"
)

func TestSmoke(t *testing.T) {
	for _, v := range []int{1, 2} {
		cfg := kernel.Config{CgroupVersion: v, MemoryPages: 24 << 18, WriteCostPerPage: 250, ReadCostPerPage: 250, AnonCostPerPage: 250, ScanCostPerPage: 50,
			VMDirty: memcg.Knobs{DirtyRatio: 20, DirtyBackgroundRatio: 10},
			DirtyExpireInterval: 30 * kernel.Second, DirtyWritebackInterval: 5 * kernel.Second,
			Disks: []kernel.DiskConfig{{Name: "vda", WriteBandwidth: 800 << 20, ReadBandwidth: 800 << 20, Latency: 100 * kernel.Microsecond, NrRequests: 64, MaxRequestPages: 256}}}
		k, err := kernel.New(cfg, kernel.Options{})
		if err != nil {
			t.Fatal(err)
		}
		m := k.NewMemcg(0, "/x1", 100<<20, -1)
		w := &workload.Writer{Ino: k.NewInode(0), Pages: 20 << 18, Block: 4, Accesses: 1}
		tk := k.NewTask("fio", m, w, 0)
		start := time.Now()
		end := k.Run(600 * kernel.Second)
		fmt.Printf("v%d: sim %.2fs wall %v events %d written %d MB/s %.0f stall %.2fs paused %.2f\n", v, end.Seconds(), time.Since(start), k.Events, tk.Written,
			float64(tk.Written*4096)/1e6/w.Finished.Seconds(), tk.Stall.Seconds(), tk.Paused.Seconds())
		fmt.Printf("%+v\n", k.Counters(m))
		fmt.Print(kernel.Format(k.MemoryStat(m)))
	}
}
