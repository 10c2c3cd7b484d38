package lab

import (
	"testing"
	"time"
)

func TestParseHostCPU(t *testing.T) {
	for _, tt := range []struct {
		name, stat string
		want       time.Duration
		err        bool
	}{
		{"busy is all but idle and iowait",
			"cpu  100 5 50 9000 700 3 2 1 0 0\ncpu0 50 2 25 4500 350 1 1 0 0 0\nintr 1\n",
			(100 + 5 + 50 + 3 + 2 + 1) * 10 * time.Millisecond, false},
		{"no cpu line", "intr 1\nctxt 2\n", 0, true},
		{"a field not a number", "cpu  x 5 50 9000 700 3 2 1 0 0\n", 0, true},
	} {
		got, err := parseHostCPU(tt.stat)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("%s: parseHostCPU = %v, %v; want %v, error %v", tt.name, got, err, tt.want, tt.err)
		}
	}
	if d, err := HostCPU(); err != nil || d <= 0 {
		t.Errorf("HostCPU() = %v, %v: want this host's busy time since boot", d, err)
	}
}
