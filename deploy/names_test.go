package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/memcgd/memcgd/metrics"
	"github.com/memcgd/memcgd/state"
)

// exposition is the metric families memcgd exports, each with the
// label=value pairs of its samples.
type exposition map[string]map[string]map[string]bool

// readExposition reads a /metrics page in the text format.
func readExposition(t *testing.T, page []byte, into exposition) {
	t.Helper()
	sample := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
	pair := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
	sc := bufio.NewScanner(bytes.NewReader(page))
	for sc.Scan() {
		m := sample.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		fam := into[m[1]]
		if fam == nil {
			fam = map[string]map[string]bool{}
			into[m[1]] = fam
		}
		for _, p := range pair.FindAllStringSubmatch(m[2], -1) {
			if fam[p[1]] == nil {
				fam[p[1]] = map[string]bool{}
			}
			fam[p[1]][p[2]] = true
		}
	}
}

// exported is every family memcgd exports: the golden /metrics page of
// package metrics, which holds the daemon's own families, and the Go
// runtime's and the process's families, which the golden page leaves out
// (they vary from run to run), from a live registry.
func exported(t *testing.T) exposition {
	t.Helper()
	e := exposition{}
	golden, err := os.ReadFile("../metrics/testdata/metrics.golden")
	if err != nil {
		t.Fatal(err)
	}
	readExposition(t, golden, e)
	reg, err := metrics.NewRegistry(func() []state.Status { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := reg.WriteText(context.Background(), &page); err != nil {
		t.Fatal(err)
	}
	live := exposition{}
	readExposition(t, page.Bytes(), live)
	for name, fam := range live {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			e[name] = fam
		}
	}
	return e
}

// targetLabels are the labels Prometheus adds to every series it scrapes
// (job, instance; node from the PodMonitor's relabeling).
var targetLabels = map[string]bool{"job": true, "instance": true, "node": true}

// grafanaVars replaces the dashboard's interval variables by durations,
// so that its queries parse as PromQL; the others ($instance, $cgroup) are
// inside label values.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// queries are the PromQL expressions of the alert rules and the dashboard
// (its panels' targets and its variables' label_values selectors), by
// where they come from.
func queries(t *testing.T) map[string]string {
	t.Helper()
	q := map[string]string{}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert, Record string
				Expr          string
			} `json:"rules"`
		} `json:"groups"`
	}
	b, err := os.ReadFile("prometheus/memcgd-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := sigsyaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			q["alert "+r.Alert+r.Record] = r.Expr
		}
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	b, err = os.ReadFile("grafana/memcgd.json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&dash); err != nil {
		t.Fatal(err)
	}
	for _, p := range dash.Panels {
		for i, tg := range p.Targets {
			q["panel "+p.Title+" #"+string(rune('A'+i))] = grafanaVars.Replace(tg.Expr)
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.*), *[a-z_]+\)$`)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("dashboard variable %s: query %q, want label_values(SELECTOR, LABEL)", v.Name, v.Definition)
			continue
		}
		q["variable "+v.Name] = m[1]
	}
	if len(q) < 20 {
		t.Errorf("%d queries read, want the rules' and the dashboard's", len(q))
	}
	return q
}

// Every metric the alert rules and the dashboard query is one memcgd
// exports (or Prometheus's own up), and every label they match on it
// carries, with the value they match where they match one value.
func TestQueriedMetricsExist(t *testing.T) {
	e := exported(t)
	for where, q := range queries(t) {
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(q)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			if vs.Name == "up" {
				return nil // Prometheus's own, per target
			}
			fam, ok := e[vs.Name]
			if !ok {
				t.Errorf("%s: %s is not a metric memcgd exports (metrics/testdata/metrics.golden)", where, vs.Name)
				return nil
			}
			for _, m := range vs.LabelMatchers {
				if m.Name == labels.MetricName || targetLabels[m.Name] {
					continue
				}
				values, ok := fam[m.Name]
				if !ok {
					t.Errorf("%s: %s has no label %s", where, vs.Name, m.Name)
					continue
				}
				if m.Type == labels.MatchEqual && !values[m.Value] {
					t.Errorf("%s: %s{%s=%q}: no such series in metrics.golden (values %v)", where, vs.Name, m.Name, m.Value, values)
				}
			}
			return nil
		})
	}
}

// The dashboard's panels have unique ids, fit the 24-column grid, and
// query the data source variable.
func TestDashboardLayout(t *testing.T) {
	b, err := os.ReadFile("grafana/memcgd.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			GridPos struct{ X, Y, W, H int } `json:"gridPos"`
			Targets []json.RawMessage        `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatal("no uid or no panels")
	}
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d taken", p.Title, p.ID)
		}
		ids[p.ID] = true
		if g := p.GridPos; g.X < 0 || g.W <= 0 || g.X+g.W > 24 || g.H <= 0 {
			t.Errorf("panel %q: gridPos %+v outside the 24 columns", p.Title, g)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: data source %q, %d targets; want ${datasource} and a query", p.Title, p.Datasource.UID, len(p.Targets))
		}
	}
}
