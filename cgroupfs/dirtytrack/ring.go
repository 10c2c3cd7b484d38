package dirtytrack

import (
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/memcgd/memcgd/internal/pollfd"
)

// A ring is one of the tracker's ring buffers and how its reader waits.
// ringbuf.Reader waits for records in epoll_wait, a blocking system call
// that holds the goroutine's P (internal/pollfd says why that delayed the
// daemon by milliseconds). So the reader reads without blocking (a
// deadline in the past) and waits for the ring on the runtime's poller: a
// ring buffer's descriptor polls readable while records wait
// (kernel/bpf/ringbuf.c, ringbuf_map_poll_kern), and the kernel wakes its
// pollers when a record is committed to a ring its reader had emptied
// (bpf_ringbuf_commit). Where the descriptor cannot join the poller, the
// reader blocks in ringbuf.Reader as before.
type ring struct {
	reader *ringbuf.Reader
	poll   *pollfd.File // nil: the reader blocks
}

// openRing opens m's reader and, where it can, its descriptor on the
// runtime's poller.
func openRing(m *ebpf.Map) (ring, error) {
	r, err := ringbuf.NewReader(m)
	if err != nil {
		return ring{}, err
	}
	p, err := pollfd.Open(m.FD(), "ringbuf")
	if err != nil {
		return ring{reader: r}, nil
	}
	// ReadInto then returns every record waiting and then
	// os.ErrDeadlineExceeded instead of blocking.
	r.SetDeadline(time.Unix(1, 0))
	return ring{reader: r, poll: p}, nil
}

// wait returns when records may wait in the ring, or an error wrapping
// os.ErrClosed once the ring is closed. Only a ring on the poller waits
// here.
func (r ring) wait() error {
	return r.poll.Wait(func() bool { return r.reader.AvailableBytes() > 0 }, time.Time{})
}

// close wakes the reader's goroutine and closes the ring.
func (r ring) close() {
	if r.poll != nil {
		r.poll.Close()
	}
	r.reader.Close()
}
