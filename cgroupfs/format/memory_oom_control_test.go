package format

import (
	"testing"
)

func TestParseMemoryOOMControl(t *testing.T) {
	tests := []parseCase[MemoryOOMControl]{{
		name: "6.18: a cgroup never in OOM",
		in:   fixture(t, "v1/memory.oom_control"),
		want: MemoryOOMControl{HasOOMKill: true},
	}, {
		name: "OOM killer disabled, in OOM, two kills",
		in:   []byte("oom_kill_disable 1\nunder_oom 1\noom_kill 2\n"),
		want: MemoryOOMControl{OOMKillDisable: 1, UnderOOM: 1, OOMKill: 2, HasOOMKill: true},
	}, {
		name: "a kernel before 4.13 has no oom_kill key",
		in:   []byte("oom_kill_disable 0\nunder_oom 0\n"),
		want: MemoryOOMControl{},
	}, {
		name:    "a bad value names the line",
		in:      []byte("oom_kill_disable 0\nunder_oom -1\n"),
		wantErr: `memory.oom_control line 2 "under_oom -1"`,
	}}
	runParseCases(t, tests, MemoryOOMControl{UnderOOM: 9}, ParseMemoryOOMControl)
}

func FuzzParseMemoryOOMControl(f *testing.F) {
	addFixtures(f, "v1/memory.oom_control")
	f.Fuzz(func(t *testing.T, b []byte) {
		var c MemoryOOMControl
		err := ParseMemoryOOMControl(b, &c)
		want := map[string]bool{"oom_kill_disable": true, "under_oom": true, "oom_kill": true}
		ref, refErr := refKeyed(b, func(k string) bool { return want[k] })
		if (err == nil) != (refErr == nil) {
			t.Fatalf("parser error %v, reference error %v", err, refErr)
		}
		if err != nil {
			return
		}
		if c.OOMKillDisable != ref["oom_kill_disable"] || c.UnderOOM != ref["under_oom"] || c.OOMKill != ref["oom_kill"] {
			t.Errorf("got %+v, reference parser says %v", c, ref)
		}
	})
}
