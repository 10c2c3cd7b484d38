package format

import (
	"testing"
)

func TestParseCgroupEvents(t *testing.T) {
	tests := []parseCase[CgroupEvents]{{
		name: "Debian 6.1: a populated cgroup, thawed",
		in:   fixture(t, "v2/cgroup.events"),
		want: CgroupEvents{Populated: 1, HasFrozen: true},
	}, {
		name: "frozen",
		in:   []byte("populated 1\nfrozen 1\n"),
		want: CgroupEvents{Populated: 1, Frozen: 1, HasFrozen: true},
	}, {
		name: "a kernel before the v2 freezer (5.2) has no frozen key",
		in:   []byte("populated 0\n"),
		want: CgroupEvents{},
	}, {
		name:    "a bad value names the line",
		in:      []byte("populated 1\nfrozen yes\n"),
		wantErr: `cgroup.events line 2 "frozen yes"`,
	}}
	runParseCases(t, tests, CgroupEvents{Frozen: 7}, ParseCgroupEvents)
}

func FuzzParseCgroupEvents(f *testing.F) {
	addFixtures(f, "v2/cgroup.events")
	f.Fuzz(func(t *testing.T, b []byte) {
		var e CgroupEvents
		err := ParseCgroupEvents(b, &e)
		want := map[string]bool{"populated": true, "frozen": true}
		ref, refErr := refKeyed(b, func(k string) bool { return want[k] })
		if (err == nil) != (refErr == nil) {
			t.Fatalf("parser error %v, reference error %v", err, refErr)
		}
		if err != nil {
			return
		}
		if e.Populated != ref["populated"] || e.Frozen != ref["frozen"] {
			t.Errorf("got %+v, reference parser says %v", e, ref)
		}
	})
}
