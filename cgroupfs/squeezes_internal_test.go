package cgroupfs

import "testing"

// An observation reports the limit a squeeze puts back whenever the
// squeeze ran at some time during its read, and the read otherwise.
func TestSqueezeMarkLimit(t *testing.T) {
	const original, lowered = 256 << 20, 200 << 20
	for _, tt := range []struct {
		name          string
		before, after squeezeMark
		read, want    uint64
	}{
		{"never squeezed", squeezeMark{}, squeezeMark{}, original, original},
		{"squeezes before the read, none during it", squeezeMark{4, original}, squeezeMark{4, original}, original, original},
		{"in flight throughout", squeezeMark{5, original}, squeezeMark{5, original}, lowered, original},
		{"began during the read", squeezeMark{4, original}, squeezeMark{5, original}, lowered, original},
		{"ended during the read", squeezeMark{5, original}, squeezeMark{6, original}, lowered, original},
		{"began and ended during the read", squeezeMark{0, 0}, squeezeMark{2, original}, lowered, original},
		{"the limit raised meanwhile by another writer", squeezeMark{5, original}, squeezeMark{6, original}, 2 * original, 2 * original},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.before.limit(tt.read, tt.after); got != tt.want {
				t.Errorf("limit(read %d) between %+v and %+v = %d, want %d", tt.read, tt.before, tt.after, got, tt.want)
			}
		})
	}
}

// A forgotten cgroup's record is gone, and one squeezed again starts anew.
func TestSqueezesForget(t *testing.T) {
	var q squeezes
	q.start("/a", 1<<30)
	q.end("/a")
	if m := q.mark("/a"); m.gen != 2 || m.original != 1<<30 {
		t.Fatalf("after one squeeze: %+v, want gen 2, original 1 GiB", m)
	}
	q.forget("/a")
	if m := q.mark("/a"); m != (squeezeMark{}) {
		t.Fatalf("after forget: %+v, want the zero mark", m)
	}
}
