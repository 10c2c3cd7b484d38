// Package control is memcgd's control socket: how `memcgd set`, `memcgd get`
// and `memcgd stat` talk to a running daemon.
//
// The socket is a unix stream socket, mode 0600 in a 0700 directory, and the
// server also checks every peer's credentials (SO_PEERCRED): only root may
// change or read the daemon's settings. A connection carries
// newline-delimited JSON requests, each answered by one JSON line:
//
//	{"op":"set","cgroup":"/a","knobs":{"dirty_bytes":"16M"}}  -> {"settings":{...}}
//	{"op":"get","cgroup":"/a"}                                -> {"settings":{...}}
//	{"op":"reset","cgroup":"/a"}                              -> {"settings":{...}}
//	{"op":"stat","cgroup":""}                                 -> {"stat":{...}} ... {"end":true}
//
// "reset" drops the cgroup's overrides; "stat" with cgroup "" reports every
// managed cgroup, one response per cgroup. A request's knobs are strings as
// the user wrote them ("16M"); a reply's are typed as memcgd get --json
// prints them: ratios and sizes numbers (bytes), min_free_kbytes a number
// or "auto", writeback_first a boolean. A stat report's values are numbers,
// null for a size with no limit and booleans for flags, with the names and
// their kinds sent once per connection. A failure is {"error":"..."}, with
// "invalid" holding the knob, value and what is allowed when a knob's value
// was refused, "unknown_knob" the name when it is not a knob. A request is
// at most MaxRequestSize bytes and must arrive within ReadTimeout.
package control
