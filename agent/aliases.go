package agent

import (
	"github.com/memcgd/memcgd/overrides"
	"github.com/memcgd/memcgd/state"
)

// Aliases kept while agent.go, maintained on another branch, still names
// these types here; they go at the merge. New code uses packages state and
// overrides.
type (
	// Status is state.Status.
	Status = state.Status
	// Counters is state.Counters.
	Counters = state.Counters
	// Settings is state.Settings.
	Settings = state.Settings
	// Overrides is overrides.Overrides.
	Overrides = overrides.Overrides
)

// DefaultOverridesPath is overrides.DefaultPath.
const DefaultOverridesPath = overrides.DefaultPath

// LoadOverrides loads overrides without cgroup identities; the daemon uses
// overrides.Load with an Identify.
func LoadOverrides(path string) (*Overrides, error) { return overrides.Load(path, nil) }

func sortStatus(s []Status) { state.Sort(s) }
