package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCPUMaxShare(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		bad  bool
	}{
		{in: "max 100000", want: math.Inf(1)},
		{in: "20000 100000", want: 0.2},
		{in: "150000 100000", want: 1.5},
		{in: "1000 200000", want: 0.005},
		{in: "max", bad: true},
		{in: "20000 0", bad: true},
		{in: "x 100000", bad: true},
	}
	for _, tt := range tests {
		got, err := cpuMaxShare(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("cpuMaxShare(%q) = %v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("cpuMaxShare(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestCPUValuesAsTheKernelPrintsThem(t *testing.T) {
	tests := []struct {
		quota, period time.Duration
		v2, v1        string
	}{
		{20 * time.Millisecond, 100 * time.Millisecond, "20000 100000", "20000"},
		{time.Millisecond, 200 * time.Millisecond, "1000 200000", "1000"},
		{0, 100 * time.Millisecond, "max 100000", "-1"},
		{-1, 10 * time.Millisecond, "max 10000", "-1"},
	}
	for _, tt := range tests {
		if got := cpuMax(tt.quota, tt.period); got != tt.v2 {
			t.Errorf("cpuMax(%v, %v) = %q, want %q", tt.quota, tt.period, got, tt.v2)
		}
		if got := quotaUsec(tt.quota); got != tt.v1 {
			t.Errorf("quotaUsec(%v) = %q, want %q", tt.quota, got, tt.v1)
		}
	}
}

func TestSummarizeBurstsCutsPeriodsAndBursts(t *testing.T) {
	ms := func(v ...float64) []int64 {
		var s []int64
		for _, x := range v {
			s = append(s, int64(x*1e6))
		}
		return s
	}
	// Period 100 ms: three writes at the start of the first period, two
	// in the second, none in the third, one in the fourth.
	stamps := ms(0, 1, 2, 100, 101.5, 350)
	s := summarizeBursts(stamps, 1<<20, 100*time.Millisecond)
	if s.perPeriod.max != 3 || s.perPeriod.p50 != 1 {
		t.Errorf("per period: %+v, want p50 1 (of 3, 2, 0, 1) and max 3", s.perPeriod)
	}
	if s.emptyShare != 0.25 {
		t.Errorf("empty share %v, want 0.25 (1 of 4 periods)", s.emptyShare)
	}
	if s.burstMiB.max != 3 || s.burstMiB.p50 != 2 {
		t.Errorf("bursts: %+v, want sizes 3, 2, 1 MiB", s.burstMiB)
	}
	if s.burstLen.max != 2 {
		t.Errorf("burst lengths: %+v, want the longest 2 ms (0 to 2)", s.burstLen)
	}
	if s.gap.max != 248.5 {
		t.Errorf("gaps: %+v, want the longest 248.5 ms (101.5 to 350)", s.gap)
	}
	if got := summarizeBursts(nil, 1<<20, time.Second); got != (burstSummary{}) {
		t.Errorf("no stamps: %+v, want the zero summary", got)
	}
}

func TestParsePairs(t *testing.T) {
	got, err := parsePairs("1ms/200ms,20ms/100ms")
	if err != nil || len(got) != 2 || got[0] != [2]time.Duration{time.Millisecond, 200 * time.Millisecond} {
		t.Errorf("parsePairs = %v, %v", got, err)
	}
	for _, bad := range []string{"1ms", "500us/10ms", "1ms/2s", "x/10ms"} {
		if _, err := parsePairs(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("parsePairs(%q) = %v, want an error naming the value", bad, err)
		}
	}
}

// TestUndo checks the journal's undo on plain files: a tenant's cpu.max
// is restored only while it holds the pacer's value and only in the same
// directory (inode); a torn last record is ignored; records are undone
// latest first.
func TestUndo(t *testing.T) {
	type rec struct{ old, new string }
	tests := []struct {
		name     string
		recs     []rec
		current  string // cpu.max when the undo runs
		recreate bool   // the tenant's directory was removed and made again
		torn     bool
		want     string
	}{
		{name: "ours: restored", recs: []rec{{"150000 100000", "20000 100000"}}, current: "20000 100000", want: "150000 100000"},
		{name: "changed since by its owner: left alone", recs: []rec{{"150000 100000", "20000 100000"}}, current: "120000 100000", want: "120000 100000"},
		{name: "another cgroup at the same path: left alone", recs: []rec{{"150000 100000", "20000 100000"}}, current: "20000 100000", recreate: true, want: "20000 100000"},
		{name: "two changes: the first value comes back", recs: []rec{{"max 100000", "20000 100000"}, {"max 100000", "5000 100000"}}, current: "5000 100000", want: "max 100000"},
		{name: "torn last record: the change it announced was not made", recs: []rec{{"max 100000", "20000 100000"}}, current: "20000 100000", torn: true, want: "max 100000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "leaf")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			ino, err := inode(dir)
			if err != nil {
				t.Fatal(err)
			}
			jpath := filepath.Join(t.TempDir(), "journal")
			j, err := OpenJournal(jpath)
			if err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(dir, "cpu.max")
			for _, r := range tt.recs {
				if err := j.Record(record{Op: opWrite, Parent: dir, Ino: ino, File: f, Old: r.old, New: r.new}); err != nil {
					t.Fatal(err)
				}
			}
			j.Close()
			if tt.torn {
				fh, err := os.OpenFile(jpath, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				fh.WriteString(`{"op":"write","parent":"` + dir + `","fi`)
				fh.Close()
			}
			if tt.recreate {
				if err := os.Remove(dir); err != nil {
					t.Fatal(err)
				}
				// Another directory takes the inode number out of use.
				if err := os.Mkdir(dir+".other", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if ino2, _ := inode(dir); ino2 == ino {
					t.Skip("the filesystem gave the new directory the same inode")
				}
			}
			if err := os.WriteFile(f, []byte(tt.current+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Undo(jpath); err != nil {
				t.Fatalf("Undo: %v", err)
			}
			got, err := readTrim(f)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("cpu.max after the undo = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestUndoOfAnAbsentPaceGroupIsANoop(t *testing.T) {
	dir := t.TempDir()
	ino, err := inode(dir)
	if err != nil {
		t.Fatal(err)
	}
	jpath := filepath.Join(t.TempDir(), "journal")
	j, err := OpenJournal(jpath)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Record(record{Op: opMkdir, Parent: dir, Ino: ino, Dir: filepath.Join(dir, paceName), Threads: "tasks"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	did, err := Undo(jpath)
	if err != nil || len(did) != 1 || !strings.Contains(did[0], "absent") {
		t.Errorf("Undo = %q, %v; want one line saying the group is absent", did, err)
	}
}
