package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
)

// DefaultAddr is where the endpoint listens unless told otherwise: the
// loopback only, as node_exporter's 9100 is usually fronted.
const DefaultAddr = "127.0.0.1:9717"

// Server timeouts: a scrape is small and local, so anything slower is a
// stuck or hostile client.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 60 * time.Second
	shutdownTimeout   = 5 * time.Second
)

// maxRequestsInFlight bounds concurrent scrapes: each walks every
// managed cgroup, so a client that opens many at once would multiply the
// daemon's memory. Others get 503, as promhttp's MaxRequestsInFlight does.
const maxRequestsInFlight = 2

// scrapeTimeout bounds the writing of one page; a client that reads
// slower than that is cut off.
const scrapeTimeout = 10 * time.Second

// Handler serves reg's page in the Prometheus text format, at most
// maxRequestsInFlight at a time; a failure is logged to logger (nil
// discards).
func Handler(reg *Registry, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	inflight := make(chan struct{}, maxRequestsInFlight)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case inflight <- struct{}{}:
			defer func() { <-inflight }()
		default:
			http.Error(w, fmt.Sprintf("limit of %d concurrent scrapes reached", maxRequestsInFlight), http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithTimeout(req.Context(), scrapeTimeout)
		defer cancel()
		w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
		if err := reg.WriteText(ctx, w); err != nil {
			logger.Warn("metrics scrape", "err", err)
		}
	})
}

// Listen binds addr (host:port). A host that is not a loopback address is
// refused unless allowNonLoopback: the endpoint names every cgroup on the
// node and has no authentication. "localhost" counts as loopback; a
// missing host (":9717") means every interface.
func Listen(addr string, allowNonLoopback bool) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("metrics address: invalid value %q: allowed host:port, e.g. %s", addr, DefaultAddr)
	}
	if !allowNonLoopback && !loopback(host) {
		return nil, fmt.Errorf("metrics address: invalid value %q: allowed a loopback address (127.0.0.1, [::1], localhost) unless non-loopback binding is allowed explicitly", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return ln, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ServerOptions are what the endpoint serves besides the metrics.
type ServerOptions struct {
	// Ready says whether the daemon is ready, nil when it is: /readyz
	// answers 200, or 503 with the error. A nil Ready is always ready.
	Ready func() error
}

// Serve serves h on ln until ctx is done, then shuts down gracefully
// (waiting up to a few seconds for scrapes in flight) and returns nil.
// Besides /metrics it serves /healthz (alive: 200 while the process
// serves) and /readyz (o.Ready).
func Serve(ctx context.Context, ln net.Listener, h http.Handler, o ServerOptions) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	// Probes that cost nothing and never meet the scrape limit: a probe
	// on /metrics would walk every cgroup, and a 503 there would have the
	// pod restarted.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.Handle("GET /readyz", readyHandler(o.Ready))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          log.New(discard{}, "", 0),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("metrics: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("metrics: shutdown: %w", err)
	}
	return nil
}

// readyHandler answers 200 "ok" while ready returns nil (or is nil), and
// 503 with the reason while it returns an error, as Kubernetes'
// readinessProbe reads it: any 2xx or 3xx is ready.
func readyHandler(ready func() error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		io.WriteString(w, "ok\n")
	})
}

// ListenAndServe is Listen then Serve.
func ListenAndServe(ctx context.Context, addr string, h http.Handler, allowNonLoopback bool, o ServerOptions) error {
	ln, err := Listen(addr, allowNonLoopback)
	if err != nil {
		return err
	}
	return Serve(ctx, ln, h, o)
}

// discard drops net/http's own log lines (TLS handshake noise and the
// like); failures that matter come back from Serve.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
