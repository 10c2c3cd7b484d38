package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/memcgd/memcgd/host"
)

// ErrNotRunning reports that no daemon answers on the control socket.
var ErrNotRunning = errors.New("daemon not running")

// DefaultTimeout bounds a request whose context has no deadline.
const DefaultTimeout = 10 * time.Second

// Client talks to a running daemon over its control socket. A Client is
// not safe for concurrent use: requests on one connection are answered in
// order.
type Client struct {
	path string
	conn *net.UnixConn
	sc   *bufio.Scanner
}

// Dial connects to the daemon's socket at path. When nothing listens there
// the error wraps ErrNotRunning and names path.
func Dial(path string) (*Client, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.Dial("unix", path)
	switch {
	case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED):
		return nil, fmt.Errorf("%w: nothing listens on %s (start it with memcgd run, or pass --socket)", ErrNotRunning, path)
	case errors.Is(err, syscall.EACCES):
		return nil, fmt.Errorf("connect %s: permission denied: memcgd's control socket is root's only", path)
	case err != nil:
		return nil, fmt.Errorf("connect %s: %w", path, err)
	}
	sc := bufio.NewScanner(c)
	// A response is one cgroup's settings or report: kilobytes.
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	return &Client{path: path, conn: c.(*net.UnixConn), sc: sc}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Set overrides knobs of cg, all or nothing, and returns cg's settings
// after the change. A refused knob comes back as a *memcg.KnobError.
func (c *Client) Set(ctx context.Context, cg host.Cgroup, knobs map[string]string) (GetResult, error) {
	return c.settings(ctx, request{Op: OpSet, Cgroup: string(cg), Knobs: knobs})
}

// Get returns cg's settings in force.
func (c *Client) Get(ctx context.Context, cg host.Cgroup) (GetResult, error) {
	return c.settings(ctx, request{Op: OpGet, Cgroup: string(cg)})
}

// Reset drops cg's overrides and returns its settings after.
func (c *Client) Reset(ctx context.Context, cg host.Cgroup) (GetResult, error) {
	return c.settings(ctx, request{Op: OpReset, Cgroup: string(cg)})
}

// Stat returns the daemon's reports of cg, or of every managed cgroup when
// cg is "", all at once. StatEach does not hold them all.
func (c *Client) Stat(ctx context.Context, cg host.Cgroup) ([]Report, error) {
	var out []Report
	err := c.StatEach(ctx, cg, func(r Report) error { out = append(out, r); return nil })
	return out, err
}

// StatEach calls fn with the daemon's report of cg, or of every managed
// cgroup when cg is "", one at a time as they arrive; an error from fn
// stops it (the connection is then closed, the rest of the answer unread).
func (c *Client) StatEach(ctx context.Context, cg host.Cgroup, fn func(Report) error) error {
	req := request{Op: OpStat, Cgroup: string(cg)}
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Now()) })
	defer stop()
	var names fieldNames
	r, err := c.do(ctx, req)
	for ; err == nil && !r.End; r, err = c.next(ctx, req) {
		if r.Stat == nil {
			return fmt.Errorf("%s %s: the daemon's response has no report", req.Op, c.path)
		}
		rep, err := r.Stat.report(&names)
		if err != nil {
			return fmt.Errorf("%s %s: %w", req.Op, c.path, err)
		}
		if err := fn(rep); err != nil {
			c.conn.Close()
			return err
		}
	}
	return err
}

func (c *Client) settings(ctx context.Context, req request) (GetResult, error) {
	r, err := c.do(ctx, req)
	if err != nil {
		return GetResult{}, err
	}
	if r.Settings == nil {
		return GetResult{}, fmt.Errorf("%s %s: the daemon's response has no settings", req.Op, c.path)
	}
	return r.Settings.settings(), nil
}

// do sends one request and reads its response.
func (c *Client) do(ctx context.Context, req request) (response, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(DefaultTimeout)
	}
	c.conn.SetDeadline(deadline)
	// Cancelling ctx moves the deadline to now, which ends a blocked
	// read or write at once.
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Now()) })
	defer stop()

	b, err := json.Marshal(req)
	if err != nil {
		return response{}, fmt.Errorf("%s request: %w", req.Op, err)
	}
	_, werr := c.conn.Write(append(b, '\n'))
	// Even when the write fails, read: a server that refuses a peer
	// answers and closes before reading, and its answer is the reason.
	return c.read(ctx, req, werr)
}

// next reads one more response to req, extending the deadline when ctx
// has none: a long answer is bounded per response, not as a whole.
func (c *Client) next(ctx context.Context, req request) (response, error) {
	if _, ok := ctx.Deadline(); !ok {
		c.conn.SetDeadline(time.Now().Add(DefaultTimeout))
	}
	return c.read(ctx, req, nil)
}

// read reads one response; werr is the error of writing the request.
func (c *Client) read(ctx context.Context, req request, werr error) (response, error) {
	if !c.sc.Scan() {
		err := c.sc.Err()
		if werr != nil {
			err = werr
		} else if err == nil {
			err = errors.New("the daemon closed the connection without answering")
		}
		return response{}, c.ioError(ctx, req, err)
	}
	var r response
	if err := json.Unmarshal(c.sc.Bytes(), &r); err != nil {
		return response{}, fmt.Errorf("%s %s: read response: %w", req.Op, c.path, err)
	}
	if r.Error != "" {
		return response{}, r.err()
	}
	return r, nil
}

func (c *Client) ioError(ctx context.Context, req request, err error) error {
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return fmt.Errorf("%s %s: %w", req.Op, c.path, err)
}
