package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/metrics"
)

// Why a reload was asked for, in its log line.
const (
	reloadSIGHUP      = "SIGHUP"
	reloadFileChanged = "config file changed"
)

// reloader puts a new config in force as SIGHUP asks, and as a change of
// the config file does: the file loaded and checked against the running
// config (reloadable), then handed to the agent; a bad config is logged
// and counted, and the running one kept. One goroutine calls it
// (reloadLoop).
type reloader struct {
	load    func() (*config.Config, error) // loadConfig of --config
	apply   func(*config.Config)           // agent.Agent.Reload
	running *config.Config
	reloads *metrics.ConfigReloads
	log     *slog.Logger
	path    string
	now     func() time.Time
}

// reload loads the config and puts it in force, or keeps the running one;
// why says what asked for it.
func (r *reloader) reload(why string) {
	next, err := r.load()
	if err == nil {
		err = reloadable(r.running, next)
	}
	if err != nil {
		r.reloads.Failed()
		r.log.Error("config reload refused; keeping the running config", "trigger", why, "err", err)
		return
	}
	r.apply(next)
	r.running = next
	r.reloads.Succeeded(r.now())
	r.log.Info("config reloaded", "trigger", why, "config", r.path)
}

// reloadLoop reloads for each SIGHUP on hup and each report on changed,
// one at a time, until ctx is done.
func reloadLoop(ctx context.Context, hup <-chan os.Signal, changed <-chan struct{}, r *reloader) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			r.reload(reloadSIGHUP)
		case <-changed:
			r.reload(reloadFileChanged)
		}
	}
}
