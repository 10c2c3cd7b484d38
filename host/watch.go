package host

// Wake says when a watched cgroup must be reported.
type Wake struct {
	// UsageAbove reports the cgroup once its usage rises above this many
	// bytes; memcg.NoLimit never does. The agent sets it so that the
	// cgroup cannot reach its dirty background threshold or its low
	// watermark unseen: new dirty pages are new charged pages.
	UsageAbove uint64
	// DirtiedAbove reports the cgroup once the host's dirtied counter for
	// it (DirtyCounter.Dirtied) passes this absolute value; 0 and
	// memcg.NoLimit never do. Only a Watcher whose host has a fast dirty
	// tracker in force (DirtyPath) honours it; others ignore it. A value
	// the counter has already passed fires at the cgroup's next dirtied
	// page, not at once.
	DirtiedAbove uint64
	// LevelAbove and LevelBelow report the cgroup once its dirty+writeback
	// bytes rise above or fall below them (the tracker's level count);
	// memcg.NoLimit and 0 are off. Only a Watcher whose host counts the
	// level (DirtyPath.Levels) honours them.
	LevelAbove, LevelBelow uint64
	// OnlyArmed reports the cgroup only at the thresholds above (and at
	// its removal where the watch still holds a file that tells, not on
	// a v1 watch with no threshold): not at reclaim, a memory stall or a
	// memory.events change in it. The agent sets it for a cgroup it looks
	// at anyway; a writer at its limit makes reclaim every 2 MiB it
	// charges (mm/vmpressure.c, vmpressure_win), hundreds of reports a
	// second that would each be a step.
	OnlyArmed bool
}

// Watcher reports cgroups that may need attention, so that the agent need
// not poll them: a usage threshold crossed, reclaim or a memory stall in
// the cgroup, a memory.events change. A report is a hint: the agent
// observes the cgroup to learn what happened, and a slow safety scan
// catches whatever a Watcher misses.
type Watcher interface {
	// Watch starts or replaces the watch of cg.
	Watch(cg Cgroup, w Wake) error
	// Unwatch stops watching cg and releases what the watch held.
	Unwatch(cg Cgroup)
	// Events delivers reported cgroups. A Watcher never blocks on a full
	// channel: it drops the report, and the safety scan finds the cgroup.
	Events() <-chan Cgroup
	// Close stops every watch and closes the Events channel.
	Close() error
}
