package format

import (
	"strings"
	"testing"
)

func TestParsePSI(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    PSI
		wantErr string
	}{{
		name: "Debian 6.1 cgroup memory.pressure after limit reclaim",
		in:   fixture(t, "v2/memory.pressure"),
		want: PSI{
			Some:    PSILine{Avg10: 0.54, Avg60: 0.09, Avg300: 0.02, Total: 165023},
			Full:    PSILine{Avg10: 0.54, Avg60: 0.09, Avg300: 0.02, Total: 165023},
			HasFull: true,
		},
	}, {
		name: "hybrid host: the unified root's io.pressure",
		in:   fixture(t, "unified/io.pressure"),
		want: PSI{
			Some:    PSILine{Avg60: 0.11, Avg300: 0.35, Total: 3448359},
			Full:    PSILine{Avg60: 0.07, Avg300: 0.28, Total: 2823866},
			HasFull: true,
		},
	}, {
		name: "hybrid host: /proc/pressure/cpu since 5.13 has an all-zero full line",
		in:   fixture(t, "unified/proc.pressure.cpu"),
		want: PSI{Some: PSILine{Avg10: 3.87, Avg60: 8.17, Avg300: 5.89, Total: 32559633}, HasFull: true},
	}, {
		name: "/proc/pressure/cpu before 5.13 has no full line",
		in:   []byte("some avg10=12.50 avg60=3.25 avg300=100.00 total=123456789\n"),
		want: PSI{Some: PSILine{Avg10: 12.5, Avg60: 3.25, Avg300: 100, Total: 123456789}},
	}, {
		name: "unknown lines and fields are ignored",
		in:   []byte("some avg10=1.00 avg600=2.00 total=5\nirq avg10=x\n"),
		want: PSI{Some: PSILine{Avg10: 1, Total: 5}},
	}, {
		name:    "a field without = names the line",
		in:      []byte("some avg10=0.00\nfull avg10 total=1\n"),
		wantErr: `pressure line 2 "full avg10 total=1"`,
	}, {
		name:    "a bad average",
		in:      []byte("some avg10=1.2.3 total=1\n"),
		wantErr: "pressure line 1",
	}, {
		name:    "a bad total",
		in:      []byte("some avg10=1.00 total=-1\n"),
		wantErr: "pressure line 1",
	}, {
		name:    "a line with no fields",
		in:      []byte("some\n"),
		wantErr: "pressure line 1",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PSI{HasFull: true, Some: PSILine{Total: 7}}
			err := ParsePSI(tt.in, &p)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p != tt.want {
				t.Errorf("got %+v, want %+v", p, tt.want)
			}
		})
	}
}

func TestParseDecimalMatchesParseFloat(t *testing.T) {
	for _, s := range []string{"0", "0.00", "0.01", "0.07", "12.34", "99.99", "100.00", "0.1", "123456789012.345", "000000000000000000001.5"} {
		got, err := parseDecimal([]byte(s))
		if err != nil {
			t.Errorf("parseDecimal(%q): %v", s, err)
			continue
		}
		want, _ := refDecimal(s)
		if got != want {
			t.Errorf("parseDecimal(%q) = %v, strconv says %v", s, got, want)
		}
	}
}

func TestParsePSIAllocatesNothing(t *testing.T) {
	b := fixture(t, "v2/memory.pressure")
	var p PSI
	if n := testing.AllocsPerRun(100, func() { _ = ParsePSI(b, &p) }); n != 0 {
		t.Errorf("%v allocations per parse, want 0", n)
	}
}

func FuzzParsePSI(f *testing.F) {
	addFixtures(f, "v2/*pressure*", "unified/*pressure*")
	f.Fuzz(func(t *testing.T, b []byte) {
		var p PSI
		err := ParsePSI(b, &p)
		ref, refErr := refPSI(b)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("parser error %v, reference error %v", err, refErr)
		}
		if err == nil && p != ref {
			t.Errorf("got %+v, reference parser says %+v", p, ref)
		}
	})
}

func BenchmarkParsePSI(b *testing.B) {
	in := fixture(b, "v2/memory.pressure")
	var p PSI
	b.ReportAllocs()
	for b.Loop() {
		if err := ParsePSI(in, &p); err != nil {
			b.Fatal(err)
		}
	}
}
