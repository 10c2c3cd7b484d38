package act

import "time"

// Exported for the real-kernel tests, which live in package act_test
// because cgrouptest imports packages this one imports.

// WithSyncfs returns o with syncfs(2) replaced by f.
func WithSyncfs(o FlushOptions, f func(fd int) error) FlushOptions {
	o.syncfs = f
	return o
}

// WithClock returns o with the clock replaced by now.
func WithClock(o FlushOptions, now func() time.Time) FlushOptions {
	o.now = now
	return o
}

// SqueezeV1 is squeezeV1.
var SqueezeV1 = squeezeV1
