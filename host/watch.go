package host

// Wake says when a watched cgroup must be reported.
type Wake struct {
	// UsageAbove reports the cgroup once its usage rises above this many
	// bytes; memcg.NoLimit never does. The agent sets it so that the
	// cgroup cannot reach its dirty background threshold or its low
	// watermark unseen: new dirty pages are new charged pages.
	UsageAbove uint64
	// DirtiedAbove reports the cgroup once the count of bytes its tasks
	// dirtied (host.DirtyCounter's counter) passes this absolute value;
	// 0 means no such watch. Only a watcher with a dirty tracker can
	// honour it; others ignore it.
	DirtiedAbove uint64
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
