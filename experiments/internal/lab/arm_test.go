package lab

import (
	"slices"
	"strings"
	"testing"
)

func TestOrderRotatesWhichArmRunsFirst(t *testing.T) {
	tests := []struct {
		run, n int
		want   []int
	}{
		{1, 2, []int{0, 1}}, // two arms: odd runs start without memcgd
		{2, 2, []int{1, 0}},
		{3, 2, []int{0, 1}},
		{1, 3, []int{0, 1, 2}},
		{2, 3, []int{1, 2, 0}},
		{3, 3, []int{2, 0, 1}},
		{4, 3, []int{0, 1, 2}},
	}
	for _, tt := range tests {
		if got := Order(tt.run, tt.n); !slices.Equal(got, tt.want) {
			t.Errorf("Order(%d, %d) = %v, want %v", tt.run, tt.n, got, tt.want)
		}
	}
}

func TestParseArmsWantsStockFirstAndKnownArmsOnce(t *testing.T) {
	tests := []struct {
		in      string
		extra   []Arm    // the experiment's own arms
		want    []string // arm names; nil for an error
		errPart string
	}{
		{in: "stock,memcgd", want: []string{"stock", "memcgd"}},
		{in: "stock,memcgd,fallback", want: []string{"stock", "memcgd", "fallback"}},
		{in: "stock,fallback", want: []string{"stock", "fallback"}},
		{in: "memcgd,stock", errPart: "stock first"},
		{in: "stock", errPart: "at least one arm with memcgd"},
		{in: "stock,tracker", errPart: `invalid arm "tracker": allowed stock, memcgd, fallback`},
		{in: "stock,memcgd,memcgd", errPart: "given twice"},
		{in: "stock,memcgd,selfpaced", errPart: `invalid arm "selfpaced"`}, // only where the experiment offers it
		{in: "stock,memcgd,selfpaced", extra: []Arm{SelfPaced}, want: []string{"stock", "memcgd", "selfpaced"}},
	}
	for _, tt := range tests {
		arms, err := ParseArms(tt.in, tt.extra...)
		if tt.want == nil {
			if err == nil || !strings.Contains(err.Error(), tt.errPart) {
				t.Errorf("ParseArms(%q) = %v, %v; want an error with %q", tt.in, arms, err, tt.errPart)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseArms(%q): %v", tt.in, err)
			continue
		}
		var names []string
		for _, a := range arms {
			names = append(names, a.Name)
		}
		if !slices.Equal(names, tt.want) {
			t.Errorf("ParseArms(%q) = %v, want %v", tt.in, names, tt.want)
		}
	}
}

func TestFallbackArmPassesTheTrackerOffFlag(t *testing.T) {
	if !Fallback.Daemon || !slices.Contains(Fallback.Args, TrackerOffFlag) {
		t.Errorf("Fallback = %+v, want a daemon run with %s", Fallback, TrackerOffFlag)
	}
	if len(Memcgd.Args) != 0 || !Memcgd.Daemon || Stock.Daemon {
		t.Errorf("Memcgd = %+v, Stock = %+v: want memcgd with its defaults and stock without a daemon", Memcgd, Stock)
	}
}

func TestDaemonResultTrackerNamesThePath(t *testing.T) {
	tests := []struct {
		fields map[string]uint64
		want   string
	}{
		{map[string]uint64{"dirty_tracker": 1}, "tracker"},
		{map[string]uint64{"dirty_tracker": 0}, "poll"},
		{map[string]uint64{"limit": 1}, "n/a"}, // a daemon from before issue 7
		{nil, "n/a"},
	}
	for _, tt := range tests {
		if got := (DaemonResult{Fields: tt.fields}).Tracker(); got != tt.want {
			t.Errorf("Tracker() with %v = %q, want %q", tt.fields, got, tt.want)
		}
	}
}
