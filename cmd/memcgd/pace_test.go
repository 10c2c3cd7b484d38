package main

import (
	"testing"
	"time"
)

func TestKernelVersion(t *testing.T) {
	for _, tt := range []struct {
		release      string
		major, minor int
		ok           bool
	}{
		{"6.18.44-fc-v669", 6, 18, true},
		{"6.1.0-57-amd64", 6, 1, true},
		{"7.0", 7, 0, true},
		{"5.15.0+", 5, 15, true},
		{"6", 0, 0, false},
		{"x.y", 0, 0, false},
	} {
		major, minor, err := kernelVersion(tt.release)
		if (err == nil) != tt.ok || major != tt.major || minor != tt.minor {
			t.Errorf("kernelVersion(%q) = %d, %d, %v; want %d, %d, ok %v", tt.release, major, minor, err, tt.major, tt.minor, tt.ok)
		}
	}
}

// --pace: auto paces from 6.18 on and freezes before, saying why; on
// paces everywhere, its period capped before 6.18; off never paces.
func TestPacing(t *testing.T) {
	for _, tt := range []struct {
		mode, release string
		pace          bool
		periodCap     time.Duration
		note          bool
	}{
		{paceAuto, "6.18.44-fc-v669", true, 0, false},
		{paceAuto, "7.0.1", true, 0, false},
		{paceAuto, "6.1.0-57-amd64", false, 0, true},
		{paceAuto, "weird", false, 0, true},
		{paceOn, "6.18.44", true, 0, false},
		{paceOn, "6.1.0-57-amd64", true, PrePacePeriodCap, false},
		{paceOn, "weird", true, PrePacePeriodCap, false},
		{paceOff, "6.18.44", false, 0, false},
		{paceOff, "6.1.0", false, 0, false},
	} {
		pace, periodCap, note := pacing(tt.mode, tt.release)
		if pace != tt.pace || periodCap != tt.periodCap || (note != "") != tt.note {
			t.Errorf("pacing(%q, %q) = %v, %v, %q; want %v, %v, a note %v", tt.mode, tt.release, pace, periodCap, note, tt.pace, tt.periodCap, tt.note)
		}
	}
}
