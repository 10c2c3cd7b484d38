package memcg

import "testing"

const mib = 1 << 20

func TestDirtyLimits(t *testing.T) {
	tests := []struct {
		name      string
		knobs     Knobs
		dirtyable uint64
		want      DirtyLimits
	}{
		{
			name:      "ratios apply to dirtyable memory, in whole pages",
			knobs:     Knobs{DirtyRatio: 20, DirtyBackgroundRatio: 10},
			dirtyable: 100 * mib,
			// ratio = 20*4096/100 = 819 (of 4096); 819*25600/4096 = 5118 pages;
			// background 409*25600/4096 = 2556 pages.
			want: DirtyLimits{Limit: 5118 * PageSize, Background: 2556 * PageSize},
		},
		{
			name:      "bytes win and round up to a page",
			knobs:     Knobs{DirtyBytes: 16*mib + 1, DirtyBackgroundBytes: 8 * mib},
			dirtyable: 100 * mib,
			want:      DirtyLimits{Limit: 16*mib + PageSize, Background: 8 * mib},
		},
		{
			name:      "bytes limit, ratio background",
			knobs:     Knobs{DirtyBytes: 64 * mib, DirtyBackgroundRatio: 10},
			dirtyable: 100 * mib,
			want:      DirtyLimits{Limit: 64 * mib, Background: 2556 * PageSize},
		},
		{
			name:      "domain_dirty_limits: background at or above the limit becomes limit/2",
			knobs:     Knobs{DirtyBytes: 16 * mib, DirtyBackgroundBytes: 32 * mib},
			dirtyable: 100 * mib,
			want:      DirtyLimits{Limit: 16 * mib, Background: 8 * mib},
		},
		{
			name:      "equal background and limit also halves",
			knobs:     Knobs{DirtyRatio: 10, DirtyBackgroundRatio: 10},
			dirtyable: 100 * mib,
			want:      DirtyLimits{Limit: 2556 * PageSize, Background: 1278 * PageSize},
		},
		{
			name:      "ratio 0 throttles at once",
			knobs:     Knobs{DirtyRatio: 0, DirtyBackgroundRatio: 0},
			dirtyable: 100 * mib,
			want:      DirtyLimits{},
		},
		{
			name:      "unbounded dirtyable memory gives unbounded ratio thresholds",
			knobs:     Knobs{DirtyRatio: 20, DirtyBackgroundRatio: 10},
			dirtyable: NoLimit,
			want:      DirtyLimits{Limit: NoLimit, Background: NoLimit / 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.knobs.DirtyLimits(tt.dirtyable); got != tt.want {
				t.Errorf("DirtyLimits(%d) = %+v, want %+v", tt.dirtyable, got, tt.want)
			}
		})
	}
}

func TestFreerun(t *testing.T) {
	for _, d := range []DirtyLimits{{Background: 8 * mib, Limit: 16 * mib}, {Background: 3, Limit: 5}, {Background: NoLimit, Limit: NoLimit}} {
		want := (d.Background>>1 + d.Limit>>1) + (d.Background & d.Limit & 1)
		if got := d.Freerun(); got != want || got < d.Background || got > d.Limit {
			t.Errorf("%+v.Freerun() = %d, want (thresh+bg)/2 = %d", d, got, want)
		}
	}
	if got := (DirtyLimits{Background: 8 * mib, Limit: 16 * mib}).Freerun(); got != 12*mib {
		t.Errorf("freerun of 8M/16M = %d, want 12M", got)
	}
}

func TestEffectiveDirtyLimits(t *testing.T) {
	root := Stat{Limit: 1024 * mib, Usage: 512 * mib, File: 100 * mib}
	tests := []struct {
		name  string
		chain []Stat
		knobs []Knobs
		want  DirtyLimits
	}{
		{
			name:  "anon usage eats headroom and lowers the thresholds (mdtc_calc_avail)",
			chain: []Stat{root, {Limit: 100 * mib, Usage: 90 * mib, File: 10 * mib, Anon: 80 * mib}},
			knobs: []Knobs{{DirtyRatio: 100, DirtyBackgroundRatio: 50}, {DirtyRatio: 50, DirtyBackgroundRatio: 25}},
			// child dirtyable = 10M file + min(10M, 512M) headroom = 20M;
			// 50 % and 25 % of it are whole pages.
			want: DirtyLimits{Limit: 10 * mib, Background: 5 * mib},
		},
		{
			name: "seed 004: free pages are the minimum over all parents",
			chain: []Stat{
				{Limit: 1024 * mib, Usage: 1000 * mib, File: 900 * mib}, // 24M free at the top
				{Limit: 512 * mib, Usage: 100 * mib, File: 50 * mib},    // 412M free here
			},
			knobs: []Knobs{{DirtyRatio: 100, DirtyBackgroundRatio: 100}, {DirtyRatio: 100, DirtyBackgroundRatio: 100}},
			// child: 50M + min(412M, 24M) = 74M; parent: 900M + 24M. Background = limit/2.
			want: DirtyLimits{Limit: 74 * mib, Background: 37 * mib},
		},
		{
			name:  "seed 004: a cgroup's limit is never above its ancestors'",
			chain: []Stat{root, {Limit: 200 * mib, Usage: 10 * mib, File: 10 * mib}},
			knobs: []Knobs{{DirtyBytes: 16 * mib, DirtyBackgroundBytes: 4 * mib}, {DirtyBytes: 64 * mib, DirtyBackgroundBytes: 32 * mib}},
			want:  DirtyLimits{Limit: 16 * mib, Background: 4 * mib},
		},
		{
			name:  "an ancestor's lower background only, limit from the child",
			chain: []Stat{root, {Limit: 200 * mib, Usage: 10 * mib, File: 10 * mib}},
			knobs: []Knobs{{DirtyBytes: 512 * mib, DirtyBackgroundBytes: 1 * mib}, {DirtyBytes: 16 * mib, DirtyBackgroundBytes: 8 * mib}},
			want:  DirtyLimits{Limit: 16 * mib, Background: 1 * mib},
		},
		{
			name:  "min over ancestors can put background at the limit: halve again",
			chain: []Stat{root, {Limit: 200 * mib, Usage: 10 * mib, File: 10 * mib}},
			knobs: []Knobs{{DirtyBytes: 512 * mib, DirtyBackgroundBytes: 20 * mib}, {DirtyBytes: 16 * mib, DirtyBackgroundBytes: 15 * mib}},
			want:  DirtyLimits{Limit: 16 * mib, Background: 15 * mib},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EffectiveDirtyLimits(tt.chain, tt.knobs); got != tt.want {
				t.Errorf("EffectiveDirtyLimits = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestHeadroom(t *testing.T) {
	chain := []Stat{{Limit: NoLimit, Usage: 5}, {Limit: 100, Usage: 40}, {Limit: 80, Usage: 30}, {Limit: 10, Usage: 20}}
	for n, want := range []uint64{NoLimit, 60, 50, 0} {
		if got := Headroom(chain[:n+1]); got != want {
			t.Errorf("Headroom(chain[:%d]) = %d, want %d", n+1, got, want)
		}
	}
}
