package sandbox

import (
	"fmt"
	"strconv"
)

// JoinArgv returns the command line of a shell that writes its own PID
// into the cgroup.procs of each of dirs, in order, and then executes argv:
// argv runs inside every one of them from its first instruction, as the
// same process, so that its rusage and exit status are argv's. A write
// that fails ends the shell with status 126 before argv runs.
//
// With notify above 2 the shell writes a line to that file descriptor once
// it has joined, and closes it for argv: the caller's sign that the
// command is inside, read from the other end of a pipe.
func JoinArgv(dirs []string, notify int, argv ...string) []string {
	script := `while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 126; shift; done; shift; `
	if notify > 2 {
		n := strconv.Itoa(notify)
		script += fmt.Sprintf(`echo >&%s; exec "$@" %s>&-`, n, n)
	} else {
		script += `exec "$@"`
	}
	out := append([]string{"sh", "-c", script, "sh"}, dirs...)
	return append(append(out, "--"), argv...)
}
