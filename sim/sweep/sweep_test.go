package sweep

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

const tiny = `version: 1
name: tiny
until: 60s
machine: {memory: 2G, cgroup: v1}
disks: [{name: vda, write_bandwidth: 200M, nr_requests: 16, max_request: 256K}]
cgroups: [{path: /w, limit: 32M}]
workloads: [{name: dd, kind: writer, cgroup: /w, size: 128M, block: 16K}]
variants: [{name: stock}, {name: seed-004, kernel: [seed-004]}]
`

// The merged outputs of the shards are byte-identical to the unsharded run.
func TestShardMergeEqualsUnsharded(t *testing.T) {
	axes := []Axis{{"cgroups[0].limit", []string{"16M", "32M", "64M"}}, {"machine.dirty_ratio", []string{"10", "20"}}}
	var whole bytes.Buffer
	if err := Run(&whole, []byte(tiny), axes, Shard{0, 1}, 2); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(whole.String(), "\n"); n != 1+3*2*2 {
		t.Fatalf("unsharded output has %d lines, want %d:\n%s", n, 1+3*2*2, whole.String())
	}
	for _, n := range []int{2, 4, 7} {
		var parts []*bytes.Buffer
		for i := 0; i < n; i++ {
			var b bytes.Buffer
			if err := Run(&b, []byte(tiny), axes, Shard{i, n}, 1); err != nil {
				t.Fatal(err)
			}
			parts = append(parts, &b)
		}
		// Merge in reverse order: the order of the shard files must not matter.
		var rs []*bytes.Reader
		for i := len(parts) - 1; i >= 0; i-- {
			rs = append(rs, bytes.NewReader(parts[i].Bytes()))
		}
		var merged bytes.Buffer
		more := make([]io.Reader, 0, len(rs))
		for _, r := range rs[1:] {
			more = append(more, r)
		}
		if err := Merge(&merged, rs[0], more...); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(merged.Bytes(), whole.Bytes()) {
			t.Errorf("%d shards merged differ from the unsharded run:\n%s\nvs\n%s", n, merged.String(), whole.String())
		}
	}
}

func TestParse(t *testing.T) {
	if _, err := ParseShard("2/2"); err == nil {
		t.Error("shard 2/2 accepted")
	}
	if s, err := ParseShard("1/3"); err != nil || s != (Shard{1, 3}) {
		t.Errorf("1/3: %v %v", s, err)
	}
	if _, err := ParseAxis("x="); err == nil {
		t.Error("empty values accepted")
	}
	if a, err := ParseAxis("cgroups[0].limit=1M,2M"); err != nil || len(a.Values) != 2 {
		t.Errorf("%v %v", a, err)
	}
}
