package format

import (
	"testing"
)

func eventFields(e *MemoryEvents) map[string]*uint64 {
	return map[string]*uint64{"low": &e.Low, "high": &e.High, "max": &e.Max,
		"oom": &e.OOM, "oom_kill": &e.OOMKill, "oom_group_kill": &e.OOMGroupKill}
}

func TestParseMemoryEvents(t *testing.T) {
	tests := []parseCase[MemoryEvents]{{
		name: "Debian 6.1: a writer through a 64M limit hit max 314 times",
		in:   fixture(t, "v2/memory.events"),
		want: MemoryEvents{Max: 314},
	}, {
		name: "a kernel before oom_group_kill (5.17) leaves it zero",
		in:   []byte("low 1\nhigh 2\nmax 3\noom 4\noom_kill 5\n"),
		want: MemoryEvents{Low: 1, High: 2, Max: 3, OOM: 4, OOMKill: 5},
	}, {
		name: "newer keys such as sock_throttled are ignored",
		in:   []byte("max 3\noom_group_kill 6\nsock_throttled 7\n"),
		want: MemoryEvents{Max: 3, OOMGroupKill: 6},
	}, {
		name:    "a bad value names the line",
		in:      []byte("low 0\nmax many\n"),
		wantErr: `memory.events line 2 "max many"`,
	}}
	runParseCases(t, tests, MemoryEvents{OOM: 99}, ParseMemoryEvents)
}

func TestParseMemoryEventsAllocatesNothing(t *testing.T) {
	b := fixture(t, "v2/memory.events")
	var e MemoryEvents
	if n := testing.AllocsPerRun(100, func() { _ = ParseMemoryEvents(b, &e) }); n != 0 {
		t.Errorf("%v allocations per parse, want 0", n)
	}
}

func FuzzParseMemoryEvents(f *testing.F) {
	addFixtures(f, "v2/memory.events*")
	f.Fuzz(func(t *testing.T, b []byte) {
		var e MemoryEvents
		err := ParseMemoryEvents(b, &e)
		fields := eventFields(&e)
		ref, refErr := refKeyed(b, func(k string) bool { return fields[k] != nil })
		if (err == nil) != (refErr == nil) {
			t.Fatalf("parser error %v, reference error %v", err, refErr)
		}
		if err != nil {
			return
		}
		for k, p := range fields {
			if *p != ref[k] {
				t.Errorf("%s = %d, reference parser says %d", k, *p, ref[k])
			}
		}
	})
}

func BenchmarkParseMemoryEvents(b *testing.B) {
	in := fixture(b, "v2/memory.events")
	var e MemoryEvents
	b.ReportAllocs()
	for b.Loop() {
		if err := ParseMemoryEvents(in, &e); err != nil {
			b.Fatal(err)
		}
	}
}
