package agent

import "errors"

// errNotScanned is Ready's answer until the loop's first scan is done.
var errNotScanned = errors.New("the first scan of the managed cgroups has not finished")

// Ready reports whether the daemon is at work: nil once the loop's first
// scan has listed the cgroups and queued every managed one for its first
// step, an error saying what is missing until then. The dirty-tracking
// path (the tracker, or polling and why) is chosen before that, in New. A
// readiness probe (/readyz) serves it.
func (a *Agent) Ready() error {
	if !a.scanned.Load() {
		return errNotScanned
	}
	return nil
}
