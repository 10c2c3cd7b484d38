package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/state"
)

// Backend is what the socket controls: the running agent.
type Backend interface {
	// Set overrides knobs of cg at run time, all or nothing, as
	// overrides.Overrides.Set does.
	Set(cg host.Cgroup, knobs map[string]string) error
	// Get returns cg's settings in force.
	Get(cg host.Cgroup) (GetResult, error)
	// Reset drops cg's overrides.
	Reset(cg host.Cgroup) error
	// Status returns the status of cg, or of every managed cgroup when cg
	// is "".
	Status(cg host.Cgroup) ([]state.Status, error)
}

// Server answers requests on the control socket.
type Server struct {
	Backend Backend
	// Log receives refused peers and settings changes; nil discards.
	Log *slog.Logger
}

// Serve accepts connections on ln until ctx is done, then closes ln,
// waits for the connections being served and returns nil. Any other
// accept failure is returned.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	backoff := time.Duration(0)
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// Out of descriptors or a connection aborted before it was
			// accepted: wait and go on, as net/http's Server does.
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				log.Warn("control socket: accept", "err", err, "retry_in", backoff)
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
					return nil
				}
				continue
			}
			return fmt.Errorf("control socket: accept: %w", err)
		}
		backoff = 0
		uc, ok := c.(*net.UnixConn)
		if !ok {
			c.Close()
			return fmt.Errorf("control socket: accept: %T is not a unix connection", c)
		}
		wg.Go(func() { s.serveConn(ctx, uc, log) })
	}
}

// serveConn answers one connection's requests, in order, until it closes,
// goes quiet for ReadTimeout or sends a request over MaxRequestSize.
func (s *Server) serveConn(ctx context.Context, c *net.UnixConn, log *slog.Logger) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	// Responses gather in a buffer: a streamed stat (one response per
	// cgroup) goes out in large writes, anything else at once.
	bw := bufio.NewWriterSize(c, 64<<10)
	enc := json.NewEncoder(bw)
	reply := func(r response) bool {
		c.SetWriteDeadline(time.Now().Add(WriteTimeout))
		err := enc.Encode(r)
		if err == nil && r.Stat == nil {
			err = bw.Flush()
		}
		if err != nil {
			log.Debug("control socket: write response", "err", err)
			return false
		}
		return true
	}

	cred, err := peerCred(c)
	if err != nil {
		log.Warn("control socket: refused a peer", "err", err)
		reply(response{Error: err.Error()})
		return
	}
	peer := slog.Group("peer", "pid", cred.Pid, "uid", cred.Uid)
	if cred.Uid != 0 {
		log.Warn("control socket: refused a peer that is not root", peer)
		reply(response{Error: fmt.Sprintf("permission denied: uid %d: memcgd's control socket takes requests from root only", cred.Uid)})
		return
	}

	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 0, 4096), MaxRequestSize)
	for {
		c.SetReadDeadline(time.Now().Add(ReadTimeout))
		if !sc.Scan() {
			if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
				log.Warn("control socket: refused an oversized request", peer, "max_bytes", MaxRequestSize)
				reply(response{Error: fmt.Sprintf("request: longer than %d bytes: allowed one JSON object per line, at most %d bytes", MaxRequestSize, MaxRequestSize)})
			} else if err != nil && ctx.Err() == nil {
				log.Debug("control socket: read request", peer, "err", err)
			}
			return
		}
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !s.handle(line, log, peer, reply) {
			return
		}
	}
}

// handle answers one request line through reply, and reports whether the
// connection can go on.
func (s *Server) handle(line []byte, log *slog.Logger, peer slog.Attr, reply func(response) bool) bool {
	req, err := decode(line)
	if err != nil {
		return reply(response{Error: fmt.Sprintf("request: %v: allowed one JSON object {\"op\", \"cgroup\", \"knobs\"} per line", err)})
	}
	cg := host.Cgroup(req.Cgroup)
	if req.Op != OpStat || cg != "" {
		if _, err := host.ParseCgroup(string(cg)); err != nil {
			return reply(response{Error: "request: " + err.Error()})
		}
	}
	if req.Op != OpSet && req.Knobs != nil {
		return reply(response{Error: fmt.Sprintf("request: knobs: not allowed with op %q, only with %q", req.Op, OpSet)})
	}
	switch req.Op {
	case OpSet:
		if len(req.Knobs) == 0 {
			return reply(response{Error: "request: knobs: missing: want at least one knob name and value"})
		}
		if err := s.Backend.Set(cg, req.Knobs); err != nil {
			return reply(errorResponse(err))
		}
		log.Info("control socket: knobs set", peer, "cgroup", cg, "knobs", req.Knobs)
		return reply(s.get(cg))
	case OpGet:
		return reply(s.get(cg))
	case OpReset:
		if err := s.Backend.Reset(cg); err != nil {
			return reply(errorResponse(err))
		}
		log.Info("control socket: overrides reset", peer, "cgroup", cg)
		return reply(s.get(cg))
	case OpStat:
		return s.stat(cg, reply)
	}
	return reply(response{Error: fmt.Sprintf("request: op: invalid value %q: allowed %s, %s, %s or %s", req.Op, OpSet, OpGet, OpReset, OpStat)})
}

// stat streams the reports of cg, or of every managed cgroup when cg is
// "", one response per cgroup and then one with End set.
func (s *Server) stat(cg host.Cgroup, reply func(response) bool) bool {
	sts, err := s.Backend.Status(cg)
	if err != nil {
		return reply(errorResponse(err))
	}
	var names fieldNames
	for i := range sts {
		if !reply(response{Stat: toWireReport(sts[i], &names)}) {
			return false
		}
	}
	return reply(response{End: true})
}

// decode reads one request line strictly.
func decode(line []byte) (request, error) {
	var req request
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	if err == nil && dec.More() {
		err = errors.New("data after the object")
	}
	return req, err
}

func (s *Server) get(cg host.Cgroup) response {
	g, err := s.Backend.Get(cg)
	if err != nil {
		return errorResponse(err)
	}
	return response{Settings: toWireSettings(g)}
}

// peerCred returns the credentials the peer had when it connected
// (SO_PEERCRED, net/core/sock.c sk_getsockopt): the kernel's word, which
// the peer cannot forge.
func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return nil, fmt.Errorf("peer credentials: %w", credErr)
	}
	return cred, nil
}
