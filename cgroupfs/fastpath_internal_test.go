package cgroupfs

import (
	"slices"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/dirtytrack"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// The tracker's events, as fastPath hands them on: a wake-up of a known
// id reports its cgroup to the Watcher; mkdir and rmdir beneath the
// managed subtree reach the notifier, others do not. An rmdir drops
// nothing but the tracker's count of that id, which the tracker dropped
// itself: the cgroup's id stays until the driver forgets it (Forget).
func TestFastPathHandle(t *testing.T) {
	mem := layout.Hierarchy{Version: layout.V2, Mount: "/sys/fs/cgroup", Root: "/"}
	tests := []struct {
		name     string
		ev       dirtytrack.Event
		wakes    []host.Cgroup
		notified []host.CgroupEvent
		uncounts bool // the count of /kube/a's id 7 is marked dropped
	}{
		{"wake of a known id", dirtytrack.Event{Kind: dirtytrack.Wake, ID: 7}, []host.Cgroup{"/kube/a"}, nil, false},
		{"wake of an unknown id", dirtytrack.Event{Kind: dirtytrack.Wake, ID: 8}, nil, nil, false},
		{"mkdir beneath", dirtytrack.Event{Kind: dirtytrack.Mkdir, ID: 9, Path: "/kube/b"}, nil,
			[]host.CgroupEvent{{Cgroup: "/kube/b"}}, false},
		{"mkdir of the subtree itself", dirtytrack.Event{Kind: dirtytrack.Mkdir, ID: 3, Path: "/kube"}, nil,
			[]host.CgroupEvent{{Cgroup: "/kube"}}, false},
		{"mkdir outside", dirtytrack.Event{Kind: dirtytrack.Mkdir, ID: 10, Path: "/system.slice/x"}, nil, nil, false},
		{"mkdir of a sibling with a common prefix", dirtytrack.Event{Kind: dirtytrack.Mkdir, ID: 11, Path: "/kubefoo"}, nil, nil, false},
		{"rmdir beneath", dirtytrack.Event{Kind: dirtytrack.Rmdir, ID: 7, Path: "/kube/a"}, nil,
			[]host.CgroupEvent{{Cgroup: "/kube/a", Removed: true}}, true},
		{"rmdir of an older cgroup at the same path", dirtytrack.Event{Kind: dirtytrack.Rmdir, ID: 6, Path: "/kube/a"}, nil,
			[]host.CgroupEvent{{Cgroup: "/kube/a", Removed: true}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFastPath(nil, "", mem, "/kube", nil)
			f.ids["/kube/a"], f.cgs[7], f.counted[7] = 7, "/kube/a", true
			var wakes []host.Cgroup
			var notified []host.CgroupEvent
			f.setWake(func(cg host.Cgroup) { wakes = append(wakes, cg) })
			f.setNotify(func(ev host.CgroupEvent) { notified = append(notified, ev) })
			f.handle(tc.ev)
			if !slices.Equal(wakes, tc.wakes) {
				t.Errorf("woke %v, want %v", wakes, tc.wakes)
			}
			if !slices.Equal(notified, tc.notified) {
				t.Errorf("notified %v, want %v", notified, tc.notified)
			}
			if _, known := f.ids["/kube/a"]; !known {
				t.Errorf("id of /kube/a forgotten by the event, want it kept until Forget")
			}
			if counted := f.counted[7]; counted == tc.uncounts {
				t.Errorf("id 7 counted = %v after the event, want %v", counted, !tc.uncounts)
			}
		})
	}
}

func TestDirtyPathString(t *testing.T) {
	for _, tc := range []struct {
		p    host.DirtyPath
		want string
	}{
		{host.DirtyPath{Tracker: true}, "tracker"},
		{host.DirtyPath{Reason: "no BTF"}, "poll (no BTF)"},
		{host.DirtyPath{}, "poll"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.p, got, tc.want)
		}
	}
}

// A write-out with the tracker lists a cgroup's open files at its first
// write-out and then at most once every ListEvery, each cgroup on its own
// clock; a clock that went back lists at once; a removed cgroup starts
// afresh.
func TestFastPathListDue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type call struct {
		cg     host.Cgroup
		at     time.Duration // since t0
		forget bool          // forget cg instead of asking
		want   bool
	}
	tests := []struct {
		name  string
		calls []call
	}{
		{"first write-out lists", []call{{cg: "/a", want: true}}},
		{"within ListEvery it does not", []call{{cg: "/a", want: true}, {cg: "/a", at: time.Millisecond}, {cg: "/a", at: ListEvery - 1}}},
		{"at ListEvery it does again, and counts from there", []call{{cg: "/a", want: true}, {cg: "/a", at: ListEvery, want: true},
			{cg: "/a", at: ListEvery + time.Millisecond}, {cg: "/a", at: 2 * ListEvery, want: true}}},
		{"each cgroup on its own clock", []call{{cg: "/a", want: true}, {cg: "/b", at: time.Millisecond, want: true},
			{cg: "/a", at: 2 * time.Millisecond}, {cg: "/b", at: 3 * time.Millisecond}}},
		{"a clock gone back lists", []call{{cg: "/a", at: time.Second, want: true}, {cg: "/a", at: 0, want: true}}},
		{"a removed cgroup starts afresh", []call{{cg: "/a", want: true}, {cg: "/a", forget: true}, {cg: "/a", at: time.Millisecond, want: true}}},
	}
	mem := layout.Hierarchy{Version: layout.V2, Mount: "/sys/fs/cgroup", Root: "/"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFastPath(nil, "", mem, "/", nil)
			for i, c := range tc.calls {
				if c.forget {
					f.forget(c.cg)
					continue
				}
				if got := f.listDue(c.cg, t0.Add(c.at)); got != c.want {
					t.Errorf("call %d: listDue(%s, t0+%v) = %v, want %v", i, c.cg, c.at, got, c.want)
				}
			}
		})
	}
}
