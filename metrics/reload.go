package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ConfigReloads counts the daemon's config reloads (SIGHUP, or the config
// file changing) for the memcgd_config_* families, named as Prometheus
// names its own. It is safe for concurrent use.
type ConfigReloads struct {
	total       *prometheus.CounterVec
	successful  prometheus.Gauge
	lastSuccess prometheus.Gauge
}

// Results of memcgd_config_reloads_total.
const (
	reloadSuccess = "success"
	reloadFailure = "failure"
)

// NewConfigReloads returns the reload metrics of a daemon that loaded its
// config at loaded: the start's load counts as the last successful one
// (memcgd_config_last_reload_successful 1 from the start), not as a
// reload.
func NewConfigReloads(loaded time.Time) *ConfigReloads {
	c := &ConfigReloads{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memcgd_config_reloads_total",
			Help: "Config reloads (SIGHUP or the config file changing), by result: success, or failure (the running config kept).",
		}, []string{"result"}),
		successful: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memcgd_config_last_reload_successful",
			Help: "1 when the last config load (at start or a reload) succeeded, 0 when it failed and the daemon runs an older config.",
		}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memcgd_config_last_reload_success_timestamp_seconds",
			Help: "When the config in force was loaded (at start or a reload), in seconds since the Unix epoch.",
		}),
	}
	// Both results from the start, so that rate() and increase() see the
	// first failure.
	c.total.WithLabelValues(reloadSuccess)
	c.total.WithLabelValues(reloadFailure)
	c.successful.Set(1)
	c.lastSuccess.Set(unixSeconds(loaded))
	return c
}

// Succeeded records a reload that put a new config in force at t.
func (c *ConfigReloads) Succeeded(t time.Time) {
	c.total.WithLabelValues(reloadSuccess).Inc()
	c.successful.Set(1)
	c.lastSuccess.Set(unixSeconds(t))
}

// Failed records a reload refused: the running config stays in force.
func (c *ConfigReloads) Failed() {
	c.total.WithLabelValues(reloadFailure).Inc()
	c.successful.Set(0)
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// WithConfigReloads exports c.
func WithConfigReloads(c *ConfigReloads) Option {
	return func(r *Registry) error {
		for _, col := range []prometheus.Collector{c.total, c.successful, c.lastSuccess} {
			if err := r.own.Register(col); err != nil {
				return err
			}
		}
		return nil
	}
}
