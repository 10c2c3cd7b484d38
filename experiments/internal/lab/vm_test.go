package lab

import (
	"bytes"
	"flag"
	"slices"
	"testing"
)

func TestExperimentArgsAreVMDefaultsUnderTheCommandLine(t *testing.T) {
	tests := []struct {
		name     string
		cmdline  []string
		defaults map[string]string
		want     []string
	}{
		{"defaults alone", []string{"-vm", "v2"}, map[string]string{"size": "512M", "rate": "20M"},
			[]string{"-rate=20M", "-size=512M"}},
		{"a flag set overrides its default", []string{"-vm=v2", "-size", "1G"}, map[string]string{"size": "512M"},
			[]string{"-size=1G"}},
		{"flags without a default pass too", []string{"-runs", "2", "-vm", "v2"}, nil,
			[]string{"-runs=2"}},
		{"how to run stays on the host", []string{"-vm", "v1", "-vm-mem", "4096", "-scratch", "/x", "-memcgd", "/m"}, nil,
			[]string{}},
	}
	for _, tt := range tests {
		var f Flags
		fs := flag.NewFlagSet("e", flag.ContinueOnError)
		f.Register(fs)
		fs.String("size", "2G", "")
		fs.String("rate", "100M", "")
		if err := fs.Parse(tt.cmdline); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := experimentArgs(fs, tt.defaults); !slices.Equal(got, tt.want) {
			t.Errorf("%s: experimentArgs = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestMarkerFilterDropsOnlyTheVMsMarkerLines(t *testing.T) {
	var out bytes.Buffer
	m := &markerFilter{w: &out}
	// Writes split lines anywhere, as the serial port delivers them.
	for _, p := range []string{"@@memcgd-vm begin e1\n| a |", " b |\n@@memcgd", "-vm end e1 exit=0\nlast\n"} {
		if _, err := m.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := out.String(), "| a | b |\nlast\n"; got != want {
		t.Errorf("filtered output %q, want %q", got, want)
	}
}
