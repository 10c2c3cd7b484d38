// Package layout finds the cgroup hierarchies memcgd works in and maps
// cgroups to their directories: Discover reads mountinfo into a Layout
// (the memory hierarchy, and the unified and v1 freezer ones when
// mounted), Self* read the calling process's own cgroups, Walk lists a
// subtree, PrivateNamespace tells whether the paths the process reads are
// the host's or its own cgroup namespace's.
//
// A cgroup is named by its path in its hierarchy, as /proc/PID/cgroup
// gives it (host.Cgroup); a Hierarchy turns it into a directory and back.
// Invariants: a Layout is a value, read once and never changed; a path
// outside a hierarchy's mounted subtree has no directory ("" from Dir),
// which no file operation opens. Nothing here writes.
package layout
