package format

import (
	"strconv"
	"strings"
	"testing"
)

func TestParseBlockStat(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		want     BlockStat
		wantErr  bool
	}{
		{"6.18, 17 fields (flush requests the 16th)",
			"  412911   124015 25427606   263140 18526035  9034227 2419315906 19403788        0  6853364 21316551   0 0 0 0  1299911  1649622\n",
			BlockStat{Flushes: 1299911, HasFlush: true}, false},
		{"4.18 to 5.4, 15 fields: no flush counts", "1 2 3 4 5 6 7 8 0 10 11 0 0 0 0\n", BlockStat{}, false},
		{"before 4.18, 11 fields", "1 2 3 4 5 6 7 8 0 10 11\n", BlockStat{}, false},
		{"a field short", "1 2 3 4 5 6 7 8 0 10 11 0 0 0 0 16\n", BlockStat{}, true},
		{"not a number", "1 2 3 4 5 6 7 8 0 10 11 0 0 0 0 x 17\n", BlockStat{}, true},
		{"empty", "", BlockStat{}, true},
	} {
		got, err := ParseBlockStat([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%s: ParseBlockStat = %+v, %v; want %+v, error %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

// refBlockStat is the reference parser: strings.Fields and strconv.
func refBlockStat(b []byte) (BlockStat, bool) {
	f := strings.Fields(string(b))
	if len(f) != 11 && len(f) != 15 && len(f) != 17 {
		return BlockStat{}, false
	}
	var s BlockStat
	for i, v := range f {
		if v == "" || strings.TrimLeft(v, "0123456789") != "" {
			return BlockStat{}, false
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return BlockStat{}, false
		}
		if len(f) == 17 && i == 15 {
			s.Flushes, s.HasFlush = n, true
		}
	}
	return s, true
}

func FuzzParseBlockStat(f *testing.F) {
	f.Add([]byte("1 2 3 4 5 6 7 8 0 10 11 0 0 0 0 16 17\n"))
	f.Add([]byte("1 2 3 4 5 6 7 8 0 10 11\n"))
	f.Add([]byte("18446744073709551616 2 3 4 5 6 7 8 0 10 11\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseBlockStat(b)
		want, ok := refBlockStat(b)
		if (err == nil) != ok || got != want {
			t.Errorf("ParseBlockStat(%q) = %+v, %v; the reference %+v, ok %v", b, got, err, want, ok)
		}
	})
}
