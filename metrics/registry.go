package metrics

import (
	"context"
	"fmt"
	"io"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/memcgd/memcgd/state"
)

// DropCounter is a watcher that counts the reports it dropped for a full
// queue (watch.Watcher): the safety scan finds those cgroups later.
type DropCounter interface {
	Dropped() uint64
}

// Registry is the endpoint's content: the per-cgroup families over the
// daemon's status snapshot, and a prometheus.Registry for the rest (the Go
// runtime, the process, the endpoint's own counters). It keeps nothing of a
// cgroup between scrapes: each reports exactly what the snapshot returns.
type Registry struct {
	snapshot func() []state.Status
	families []family
	own      *prometheus.Registry
	invalid  prometheus.Counter
}

// Option configures a Registry.
type Option func(*Registry) error

// WithDropped exports d's dropped reports as
// memcgd_watcher_dropped_reports_total.
func WithDropped(d DropCounter) Option {
	return func(r *Registry) error {
		return r.own.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "memcgd_watcher_dropped_reports_total",
			Help: "Cgroup event reports the watcher dropped because its queue was full; the safety scan finds those cgroups later.",
		}, func() float64 { return float64(d.Dropped()) }))
	}
}

// WithDirtyTracking exports the dirty-tracking path in force ("tracker"
// or "poll") as memcgd_dirty_tracking_path{path} 1, and the other path as
// 0: every state of the enumeration is a series, so that a query for
// either finds one.
func WithDirtyTracking(path string) Option {
	return func(r *Registry) error {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "memcgd_dirty_tracking_path",
			Help: "The dirty-tracking path in force, 1 for it and 0 for the other: tracker (the eBPF tracker wakes the daemon) or poll (an adaptive interval, the fallback).",
		}, []string{"path"})
		for _, p := range []string{state.TrackingTracker, state.TrackingPoll} {
			g.WithLabelValues(p).Set(boolValue(p == path))
		}
		return r.own.Register(g)
	}
}

// NewRegistry returns a Registry over snapshot, which returns the status
// of every cgroup the daemon knows, parents first; the unmanaged ones are
// left out.
func NewRegistry(snapshot func() []state.Status, opts ...Option) (*Registry, error) {
	r := &Registry{
		snapshot: snapshot,
		families: families(),
		own:      prometheus.NewRegistry(),
		invalid: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memcgd_metrics_invalid_names_total",
			Help: "Managed cgroups left out of scrapes because their name is not valid UTF-8, counted at each scrape.",
		}),
	}
	for _, c := range []prometheus.Collector{
		r.invalid,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := r.own.Register(c); err != nil {
			return nil, err
		}
	}
	for _, o := range opts {
		if err := o(r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// WriteText writes the whole page in the text format: the per-cgroup
// families, then the rest.
func (r *Registry) WriteText(ctx context.Context, w io.Writer) error {
	skipped, err := writeCgroups(ctx, w, r.families, r.snapshot())
	r.invalid.Add(float64(skipped))
	if err != nil {
		return fmt.Errorf("write cgroup metrics: %w", err)
	}
	mfs, err := r.own.Gather()
	if err != nil {
		return fmt.Errorf("gather: %w", err)
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return fmt.Errorf("write metrics: %w", err)
		}
	}
	return nil
}
