package main

import (
	"slices"
	"testing"
)

func TestWithSysmonGODEBUG(t *testing.T) {
	for _, tt := range []struct {
		name    string
		environ []string
		want    []string
		changed bool
	}{
		{"no GODEBUG: one is added", []string{"PATH=/bin"},
			[]string{"PATH=/bin", "GODEBUG=" + sysmonGODEBUG}, true},
		{"an empty GODEBUG takes the setting alone", []string{"GODEBUG=", "PATH=/bin"},
			[]string{"GODEBUG=" + sysmonGODEBUG, "PATH=/bin"}, true},
		{"the operator's settings are kept, the setting added after them", []string{"GODEBUG=gctrace=1,madvdontneed=1"},
			[]string{"GODEBUG=gctrace=1,madvdontneed=1," + sysmonGODEBUG}, true},
		{"a schedtrace the operator set stands, whatever its value", []string{"GODEBUG=gctrace=1,schedtrace=0"},
			[]string{"GODEBUG=gctrace=1,schedtrace=0"}, false},
		{"the setting already there: no second execution", []string{"GODEBUG=" + sysmonGODEBUG},
			[]string{"GODEBUG=" + sysmonGODEBUG}, false},
		{"of two GODEBUG entries, the first is the runtime's and is changed", []string{"GODEBUG=gctrace=1", "GODEBUG=schedtrace=5"},
			[]string{"GODEBUG=gctrace=1," + sysmonGODEBUG, "GODEBUG=schedtrace=5"}, true},
		{"a key that only ends in schedtrace is another setting", []string{"GODEBUG=xschedtrace=1"},
			[]string{"GODEBUG=xschedtrace=1," + sysmonGODEBUG}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.environ)
			got, changed := withSysmonGODEBUG(in)
			if !slices.Equal(got, tt.want) || changed != tt.changed {
				t.Errorf("withSysmonGODEBUG(%q) = %q, %v; want %q, %v", tt.environ, got, changed, tt.want, tt.changed)
			}
			if !slices.Equal(in, tt.environ) {
				t.Errorf("withSysmonGODEBUG changed its argument to %q", in)
			}
		})
	}
}
