package metrics

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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

// Handler serves reg's metrics in the Prometheus text or OpenMetrics
// format; a collector's error is logged to log (nil discards) and the
// other metrics are still served.
func Handler(reg prometheus.Gatherer, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
		Timeout:       writeTimeout - time.Second,
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

// Serve serves h on ln until ctx is done, then shuts down gracefully
// (waiting up to a few seconds for scrapes in flight) and returns nil.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
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

// ListenAndServe is Listen then Serve.
func ListenAndServe(ctx context.Context, addr string, h http.Handler, allowNonLoopback bool) error {
	ln, err := Listen(addr, allowNonLoopback)
	if err != nil {
		return err
	}
	return Serve(ctx, ln, h)
}

// discard drops net/http's own log lines (TLS handshake noise and the
// like); failures that matter come back from Serve.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
