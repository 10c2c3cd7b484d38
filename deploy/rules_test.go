package deploy

import (
	"os"
	"os/exec"
	"slices"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

// promtool finds promtool (Debian's prometheus package; scripts/install-deps
// installs it), or skips; with CI=true its absence fails.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("promtool (Debian's prometheus package) not found: %v", err)
		}
		t.Skipf("promtool (Debian's prometheus package) not found: %v", err)
	}
	return p
}

// The alert rules are valid rules, and their unit test passes: each alert
// fires where and when it should, and not on a healthy node.
func TestAlertRules(t *testing.T) {
	p := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "memcgd-rules.yaml"},
		{"test", "rules", "memcgd-rules_test.yaml"},
	} {
		cmd := exec.Command(p, args...)
		cmd.Dir = "prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

// Every alert has a case in the unit test in which it fires.
func TestEveryAlertIsTested(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	for path, v := range map[string]any{"prometheus/memcgd-rules.yaml": &rules, "prometheus/memcgd-rules_test.yaml": &tests} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := sigsyaml.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	var fired []string
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired = append(fired, a.Alertname)
			}
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if !slices.Contains(fired, r.Alert) {
				t.Errorf("alert %s: no case of memcgd-rules_test.yaml has it fire", r.Alert)
			}
		}
	}
	if n == 0 {
		t.Error("no alert rules read")
	}
}
