package lab

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/memcgd/memcgd/cgroupfs/format"
)

// Pressure is the cumulative stall time of a cgroup's tasks on each
// resource, from the PSI files of its unified-hierarchy mirror
// (kernel/sched/psi.c): "some" totals, in microseconds.
type Pressure struct {
	CPU, Memory, IO uint64
}

// Sub is p − q, resource by resource.
func (p Pressure) Sub(q Pressure) Pressure {
	return Pressure{CPU: p.CPU - q.CPU, Memory: p.Memory - q.Memory, IO: p.IO - q.IO}
}

// Pressure reads c's PSI totals. A cgroup without a unified mirror has
// none, which is an error.
func (c *Cgroup) Pressure() (Pressure, error) {
	if c.Unified == "" {
		return Pressure{}, fmt.Errorf("pressure of %s: no unified-hierarchy mirror", c.Path)
	}
	var p Pressure
	var psi format.PSI
	for _, r := range []struct {
		file string
		dst  *uint64
	}{{"cpu.pressure", &p.CPU}, {"memory.pressure", &p.Memory}, {"io.pressure", &p.IO}} {
		f := filepath.Join(c.Unified, r.file)
		b, err := os.ReadFile(f)
		if err != nil {
			return Pressure{}, fmt.Errorf("pressure of %s: %w", c.Path, err)
		}
		if err := format.ParsePSI(b, &psi); err != nil {
			return Pressure{}, fmt.Errorf("pressure of %s: %s: %w", c.Path, f, err)
		}
		*r.dst = psi.Some.Total
	}
	return p, nil
}
