package metrics

import (
	"testing"
	"time"

	"github.com/memcgd/memcgd/internal/cputime"
)

// cpuTime is the CPU time this process has used (internal/cputime).
func cpuTime(b *testing.B) time.Duration {
	d, err := cputime.Self()
	if err != nil {
		b.Fatal(err)
	}
	return d
}
