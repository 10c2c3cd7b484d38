package kernel

// Block devices (block/blk-mq.c, seen from outside): a disk serves
// requests in submission order at its bandwidth, each taking at least the
// device latency, with at most NrRequests requests queued or in flight; a
// submitter that finds the queue full sleeps until a request completes, as
// in blk_mq_get_tag(). Completion times never decrease, so one pending
// event (the oldest request's) suffices.

// DiskConfig describes one disk.
type DiskConfig struct {
	Name string
	// WriteBandwidth and ReadBandwidth are in bytes per second.
	WriteBandwidth, ReadBandwidth int64
	// Latency is the least service time of a request.
	Latency Time
	// NrRequests bounds the requests queued and in flight (nr_requests).
	NrRequests int
	// MaxRequestPages is the largest request, in pages (max_sectors_kb / 4).
	MaxRequestPages int64
}

type request struct {
	done  Time
	pages int64
	ino   int32 // the file written or read; -1 for a journal commit
	task  int32 // reader or fdatasync waiting on it, or -1
	read  bool
}

type disk struct {
	cfg      DiskConfig
	ring     []request // FIFO of outstanding requests
	head, n  int
	chanFree Time    // when the transfer channel is next free
	blocked  []int32 // wbs waiting for a free request
	// Statistics.
	written, read int64 // pages
	busy          Time
}

func (d *disk) full() bool { return d.n >= d.cfg.NrRequests }

// congested is blk_queue_congestion_on_threshold(): at least 7/8 of
// nr_requests in use.
func (d *disk) congested() bool { return d.n >= d.cfg.NrRequests-d.cfg.NrRequests/8 }

// submit queues a request at time now; the caller checks full() first.
func (k *Kernel) submit(di int32, now Time, r request) {
	d := &k.disks[di]
	bw := d.cfg.WriteBandwidth
	if r.read {
		bw = d.cfg.ReadBandwidth
	}
	xfer := Time(r.pages * PageSize * int64(Second) / bw)
	start := max(now, d.chanFree)
	d.chanFree = start + xfer
	d.busy += xfer
	r.done = max(d.chanFree, now+d.cfg.Latency)
	if d.n == len(d.ring) {
		nr := make([]request, max(2*len(d.ring), 16))
		for i := 0; i < d.n; i++ {
			nr[i] = d.ring[(d.head+i)%len(d.ring)]
		}
		d.ring, d.head = nr, 0
	}
	d.ring[(d.head+d.n)%len(d.ring)] = r
	d.n++
	if d.n == 1 {
		k.heap.push(r.done, evIODone, di, 0)
	}
}

// ioDone completes the oldest request of disk di.
func (k *Kernel) ioDone(di int32) {
	d := &k.disks[di]
	r := d.ring[d.head]
	d.head = (d.head + 1) % len(d.ring)
	d.n--
	if d.n > 0 {
		k.heap.push(d.ring[d.head].done, evIODone, di, 0)
	}
	if r.read {
		d.read += r.pages
		if r.task >= 0 {
			t := k.tasks[r.task]
			t.readsInFlight--
			if t.readsInFlight == 0 {
				k.wake(t)
			}
		}
	} else {
		d.written += r.pages
		if r.ino >= 0 {
			k.endWriteback(r.ino, r.pages)
		} else if r.task >= 0 {
			k.wake(k.tasks[r.task]) // a journal commit (sync.go)
		}
	}
	if len(d.blocked) > 0 {
		for _, wb := range d.blocked {
			k.wbs[wb].blocked = false
			k.queueFlusher(wb, k.now)
		}
		d.blocked = d.blocked[:0]
	}
}
