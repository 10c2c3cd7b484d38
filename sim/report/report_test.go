package report

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/sim/run"
	"github.com/memcgd/memcgd/sim/scenario"
)

func results(t *testing.T) (*scenario.Scenario, []*run.Result) {
	t.Helper()
	sc, err := scenario.Parse([]byte(`version: 1
name: r
until: 30s
sample: 50ms
machine: {memory: 2G, cgroup: v2}
disks: [{name: vda, write_bandwidth: 100M}]
cgroups: [{path: /w, limit: 64M}]
workloads: [{name: dd, kind: writer, cgroup: /w, size: 256M, block: 64K}]
variants: [{name: stock}, {name: kswapd, kernel: [seed-001]}]
report: {table: seed-001}
`))
	if err != nil {
		t.Fatal(err)
	}
	var rs []*run.Result
	for _, v := range sc.Variants {
		r, err := run.Variant(sc, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return sc, rs
}

// The CSV has one row per sample and variant, every row as wide as the
// header, and the sizes it reports are the samples'.
func TestCSV(t *testing.T) {
	_, rs := results(t)
	var b bytes.Buffer
	if err := CSV(&b, rs); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + len(rs[0].Samples) + len(rs[1].Samples); len(recs) != want {
		t.Fatalf("%d CSV rows, want %d", len(recs), want)
	}
	if recs[1][0] != "stock" || recs[len(recs)-1][0] != "kswapd" {
		t.Errorf("variant column: %q … %q", recs[1][0], recs[len(recs)-1][0])
	}
	if recs[0][3] != "limit_mib" || recs[1][3] != "64.000" {
		t.Errorf("limit column %q = %q, want 64.000", recs[0][3], recs[1][3])
	}
}

// The seed table has a column per variant and seed 001's rows.
func TestSeedTable(t *testing.T) {
	sc, rs := results(t)
	var b bytes.Buffer
	if err := Write(&b, sc, rs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"| quantity", "| stock", "| kswapd", "| kswapd_steal", "| pg_pgsteal", "| allocstall"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
