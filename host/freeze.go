package host

import "context"

// Freezer is a Host that can hold a cgroup frozen across steps: the
// closed-loop throttle (policy.FreezerHeld). A Host without it can only
// pause a cgroup for a given time (Host.Pause).
type Freezer interface {
	// Freeze starts a throttle episode: it records the freeze (one
	// journal record for the whole episode) and freezes cg. An error
	// wrapping errors.ErrUnsupported says no freezer reaches the cgroup;
	// its message says why. When ctx ends, the host ends the episode on
	// its own: the cgroup is never left frozen past its caller.
	Freeze(ctx context.Context, cg Cgroup) (Frozen, error)
}

// Frozen is one throttle episode of a cgroup, frozen when it starts.
type Frozen interface {
	// Thaw lets the cgroup's tasks run again, within the episode.
	Thaw() error
	// Refreeze stops them again, within the episode.
	Refreeze() error
	// End thaws the cgroup if the episode's freeze is in force and
	// closes the episode's record. Calls after the first do nothing.
	End() error
}
