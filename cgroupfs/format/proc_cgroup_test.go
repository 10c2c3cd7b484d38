package format

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseProcCgroup(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    []ProcCgroup
		wantErr string
	}{{
		name: "hybrid host: memory on v1, the unified line last",
		in:   fixture(t, "v1/cgroup"),
		want: []ProcCgroup{
			{ID: 9, Controllers: []string{"name=systemd"}, Path: "/"},
			{ID: 8, Controllers: []string{"pids"}, Path: "/"},
			{ID: 7, Controllers: []string{"blkio"}, Path: "/"},
			{ID: 6, Controllers: []string{"freezer"}, Path: "/"},
			{ID: 5, Controllers: []string{"devices"}, Path: "/"},
			{ID: 4, Controllers: []string{"memory"}, Path: "/process_api/9c7bce5ed065c4b255e2491814c44147"},
			{ID: 3, Controllers: []string{"cpuset"}, Path: "/"},
			{ID: 2, Controllers: []string{"cpuacct"}, Path: "/"},
			{ID: 1, Controllers: []string{"cpu"}, Path: "/"},
			{ID: 0, Path: "/"},
		},
	}, {
		name: "v2 only",
		in:   fixture(t, "v2/proc_self_cgroup"),
		want: []ProcCgroup{{ID: 0, Path: "/memcgd-fixture"}},
	}, {
		name: "co-mounted controllers, a colon in the path, a removed v2 cgroup",
		in:   []byte("3:cpu,cpuacct:/a:b\n0::/gone (deleted)\n0:: (deleted)\n"),
		want: []ProcCgroup{
			{ID: 3, Controllers: []string{"cpu", "cpuacct"}, Path: "/a:b"},
			{ID: 0, Path: "/gone", Deleted: true},
			{ID: 0, Path: "", Deleted: true},
		},
	}, {
		name:    "a relative path names the line",
		in:      []byte("0::/\n4:memory:a/b\n"),
		wantErr: `cgroup line 2 "4:memory:a/b": path "a/b": want an absolute path`,
	}, {
		name:    "too few fields",
		in:      []byte("4:memory\n"),
		wantErr: `cgroup line 1 "4:memory": want ID:controllers:path`,
	}, {
		name:    "a bad ID",
		in:      []byte("-1::/\n"),
		wantErr: `hierarchy ID "-1": want a number >= 0`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProcCgroup(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseProcCgroup(f *testing.F) {
	addFixtures(f, "v1/cgroup", "v2/proc_self_cgroup")
	f.Fuzz(func(t *testing.T, b []byte) {
		cgs, err := ParseProcCgroup(b)
		if err != nil {
			return
		}
		for _, cg := range cgs {
			if !strings.HasPrefix(cg.Path, "/") && !(cg.Deleted && cg.Path == "") {
				t.Errorf("accepted path %q", cg.Path)
			}
			if cg.ID < 0 {
				t.Errorf("accepted ID %d", cg.ID)
			}
			for _, c := range cg.Controllers {
				if strings.ContainsAny(c, ",\n") {
					t.Errorf("controller %q", c)
				}
			}
		}
	})
}
