package main

import "testing"

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
