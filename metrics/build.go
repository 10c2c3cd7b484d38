package metrics

import "github.com/prometheus/client_golang/prometheus"

// BuildInfo is what the running binary was built from, as
// memcgd_build_info's labels.
type BuildInfo struct {
	// Version is the module version (a tag, or Go's pseudo-version, with
	// +dirty for a modified tree) or the one set at link time.
	Version string
	// Revision is the VCS commit, "" when unknown.
	Revision string
	// GoVersion is the Go toolchain that built it (runtime.Version).
	GoVersion string
}

// WithBuildInfo exports b as memcgd_build_info{version,revision,goversion}
// 1, the convention of prometheus_build_info: join it on instance to label
// any other series with the version.
func WithBuildInfo(b BuildInfo) Option {
	return func(r *Registry) error {
		return r.own.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "memcgd_build_info",
			Help: "1, labelled with the version, VCS revision and Go version memcgd was built from.",
			ConstLabels: prometheus.Labels{
				"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion,
			},
		}, func() float64 { return 1 }))
	}
}
