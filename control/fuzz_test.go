package control

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// FuzzRequest: any request line gets an answer, never a panic: one
// response (an error, or settings), or for stat a stream of reports that
// ends with End. A refused request changes nothing.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		`{"op":"get","cgroup":"/a"}`,
		`{"op":"set","cgroup":"/a","knobs":{"dirty_bytes":"16M"}}`,
		`{"op":"set","cgroup":"/a/../b","knobs":{"dirty_ratio":"5"}}`,
		`{"op":"reset","cgroup":"/a/b"}`,
		`{"op":"stat","cgroup":""}`,
		`{"op":"stat","cgroup":"/a\u0000"}`,
		`{"op":"stat"} {"op":"get"}`,
		`{"op":"nope","cgroup":"/a","extra":1}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		b := newFakeBackend(t)
		before := b.overrides.Cgroups()
		s := &Server{Backend: b}
		var got []response
		s.handle(line, slog.New(slog.DiscardHandler), slog.Attr{}, func(r response) bool {
			if _, err := json.Marshal(r); err != nil {
				t.Fatalf("response %+v cannot be encoded: %v", r, err)
			}
			got = append(got, r)
			return true
		})
		if len(got) == 0 {
			t.Fatalf("no response to %q", line)
		}
		last := got[len(got)-1]
		for _, r := range got[:len(got)-1] {
			if r.Stat == nil {
				t.Fatalf("%q: a response before the last that is not a report: %+v", line, r)
			}
		}
		if len(got) > 1 && !last.End && last.Error == "" {
			t.Fatalf("%q: a stream that does not end: last %+v", line, last)
		}
		if last.Error != "" {
			if after := b.overrides.Cgroups(); len(after) != len(before) {
				t.Fatalf("%q refused (%s) but changed the overrides: %v -> %v", line, last.Error, before, after)
			}
			if strings.ContainsRune(last.Error, '\n') {
				t.Fatalf("%q: multi-line error %q", line, last.Error)
			}
		}
	})
}
