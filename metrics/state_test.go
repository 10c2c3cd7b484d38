package metrics

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/state"
)

// memcgd_cgroup_state is 1 for the state the daemon reports and 0 for
// each other one; a cgroup not stepped yet has no sample.
func TestStateGauge(t *testing.T) {
	all := []string{state.StateIdle, state.StateActive, state.StatePaced, state.StateThrottled, state.StateFrozen}
	for _, s := range append(all, "") {
		t.Run(fmt.Sprintf("state %q", s), func(t *testing.T) {
			sts := []state.Status{{Cgroup: "/a", Managed: true, State: s}}
			page := scrape(t, func() []state.Status { return sts })
			for _, other := range all {
				line := fmt.Sprintf("memcgd_cgroup_state{cgroup=\"/a\",state=%q} ", other)
				want := line + "0\n"
				if other == s {
					want = line + "1\n"
				}
				has := strings.Contains(page, want)
				if s == "" && strings.Contains(page, line) {
					t.Errorf("a sample %s for a cgroup with no state yet", line)
				} else if s != "" && !has {
					t.Errorf("no %q in the page", strings.TrimSpace(want))
				}
			}
		})
	}
}
