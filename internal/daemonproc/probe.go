package daemonproc

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/memcgd/memcgd/control"
	"github.com/memcgd/memcgd/host"
)

// pollEvery is how often Await asks again.
const pollEvery = 10 * time.Millisecond

// Await waits until the daemon is ready: its control socket accepts a
// connection, which it opens only after undoing what its journal holds, and,
// with a metrics listener, /readyz answers 200, which it does once its
// first scan of the managed cgroups is done. It fails at once if the
// daemon exits, and when ctx ends (give it a deadline).
func (d *Daemon) Await(ctx context.Context) error {
	var why error // the last answer not cut short by ctx's end
	for {
		err := d.Ready(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() == nil || why == nil {
			why = err
		}
		select {
		case <-d.exited:
			return fmt.Errorf("memcgd exited before it was ready (%v): %v\n%s", why, d.err, d.Tail(30))
		case <-ctx.Done():
			return fmt.Errorf("memcgd not ready: %w (%v)\n%s", why, ctx.Err(), d.Tail(30))
		case <-time.After(pollEvery):
		}
	}
}

// Ready asks once whether the daemon is ready (Await), and says why not.
// It asks the control socket for nothing: a stat of thousands of cgroups
// is itself work for the daemon.
func (d *Daemon) Ready(ctx context.Context) error {
	c, err := control.Dial(d.Socket)
	if err != nil {
		return err
	}
	c.Close()
	if d.Listen == "" {
		return nil
	}
	code, body, err := d.Get(ctx, "/readyz")
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET /readyz: %d %s", code, body)
	}
	return nil
}

// Get fetches path from the daemon's metrics listener and returns the
// status code and body.
func (d *Daemon) Get(ctx context.Context, path string) (code int, body string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.Listen+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", fmt.Errorf("GET %s: %w", path, err)
	}
	return resp.StatusCode, string(b), nil
}

// Metrics is the daemon's metrics page (GET /metrics), in the Prometheus
// text format.
func (d *Daemon) Metrics(ctx context.Context) (string, error) {
	code, body, err := d.Get(ctx, "/metrics")
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET /metrics: %d %s", code, body)
	}
	return body, err
}

// Stat returns the daemon's report on cg over its control socket, the
// fields of `memcgd stat --json` by name: a flag is 1 or 0, a size with no
// limit memcg.NoLimit, and a field the kernel lacks (null) is absent. An
// error says the daemon does not report on cg.
func (d *Daemon) Stat(ctx context.Context, cg host.Cgroup) (map[string]uint64, error) {
	c, err := control.Dial(d.Socket)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	reports, err := c.Stat(ctx, cg)
	if err != nil {
		return nil, fmt.Errorf("memcgd stat %s: %w", cg, err)
	}
	for _, r := range reports {
		if r.Cgroup != cg {
			continue
		}
		out := make(map[string]uint64, len(r.Fields))
		for _, f := range r.Fields {
			if f.Known {
				out[f.Name] = f.Value
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("memcgd stat %s: no report on the cgroup among %d", cg, len(reports))
}

// Count returns how many cgroups the daemon reports on.
func (d *Daemon) Count(ctx context.Context) (int, error) {
	c, err := control.Dial(d.Socket)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	n := 0
	err = c.StatEach(ctx, "", func(control.Report) error { n++; return nil })
	return n, err
}
