package format

import (
	"strconv"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/memcg"
)

func TestParseUint(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    uint64
		wantErr string
	}{
		{name: "v1 memory.usage_in_bytes", in: fixture(t, "v1/memory.usage_in_bytes"), want: 65933312},
		{name: "v1 memory.failcnt", in: fixture(t, "v1/memory.failcnt"), want: 35},
		{name: "v2 memory.current", in: fixture(t, "v2/memory.current"), want: 66150400},
		{name: "no trailing newline", in: []byte("0"), want: 0},
		{name: "largest uint64", in: []byte("18446744073709551615\n"), want: 18446744073709551615},
		{name: "empty", in: []byte("\n"), wantErr: `value "": empty; want a decimal number`},
		{name: "max is not a count", in: []byte("max\n"), wantErr: `value "max": not a decimal digit`},
		{name: "past uint64", in: []byte("18446744073709551616"), wantErr: "out of range"},
		{name: "two lines", in: []byte("1\n2\n"), wantErr: "not a decimal digit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseUint(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %d, %v, want %d", got, err, tt.want)
			}
		})
	}
}

func TestParseLimit(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    uint64
		wantErr string
	}{
		{name: "v1 64M limit", in: fixture(t, "v1/memory.limit_in_bytes"), want: 64 << 20},
		{name: "v1 no limit (4 KiB pages)", in: fixture(t, "v1/memory.limit_in_bytes.unlimited"), want: memcg.NoLimit},
		{name: "v1 no limit (64 KiB pages)", in: []byte("9223372036854710272\n"), want: memcg.NoLimit},
		{name: "just below v1's no limit is a limit", in: []byte("9223372036854710271\n"), want: 9223372036854710271},
		{name: "v2 memory.max 64M", in: fixture(t, "v2/memory.max"), want: 64 << 20},
		{name: "v2 memory.high max", in: fixture(t, "v2/memory.high"), want: memcg.NoLimit},
		{name: "v2 max without newline", in: []byte("max"), want: memcg.NoLimit},
		{name: "suffixes are for writing, not reading", in: []byte("64M\n"), wantErr: `limit "64M": not a decimal digit; want "max" or a decimal number of bytes`},
		{name: "empty", in: nil, wantErr: `limit "": empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLimit(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %d, %v, want %d", got, err, tt.want)
			}
		})
	}
}

func FuzzParseUint(f *testing.F) {
	addFixtures(f, "v1/memory.*_in_bytes*", "v1/memory.failcnt", "v2/memory.current", "v2/memory.max", "v2/memory.high")
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseUint(b)
		s := strings.TrimSuffix(string(b), "\n")
		want, refErr := strconv.ParseUint(s, 10, 64)
		if s != "" && (s[0] < '0' || s[0] > '9') {
			refErr = strconv.ErrSyntax
		}
		if (err == nil) != (refErr == nil) || got != want && err == nil {
			t.Fatalf("ParseUint(%q) = %d, %v; strconv says %d, %v", b, got, err, want, refErr)
		}
		if lim, err := ParseLimit(b); err == nil && s != "max" && lim != got && lim != memcg.NoLimit {
			t.Fatalf("ParseLimit(%q) = %d, ParseUint says %d", b, lim, got)
		}
	})
}
