package sched

// pendingOps are the ops in flight, by ID, with what their results need.
// The entries live in a slab whose slots are reused as results come back,
// and the index maps an ID to its slot. A map of pendingOp values would
// allocate each (a Go map stores an element of more than 128 bytes out of
// line), and a paced cgroup's steps emit a few ops each, hundreds of
// times a second.
type pendingOps struct {
	slab  []pendingOp
	free  []int32
	index map[uint64]int32
}

// put keeps p under p.op.ID.
func (q *pendingOps) put(p pendingOp) {
	if q.index == nil {
		q.index = map[uint64]int32{}
	}
	var i int32
	if n := len(q.free); n > 0 {
		i, q.free = q.free[n-1], q.free[:n-1]
		q.slab[i] = p
	} else {
		i = int32(len(q.slab))
		q.slab = append(q.slab, p)
	}
	q.index[p.op.ID] = i
}

// get returns the entry of id, still kept; nil if there is none.
func (q *pendingOps) get(id uint64) *pendingOp {
	i, ok := q.index[id]
	if !ok {
		return nil
	}
	return &q.slab[i]
}

// take removes the entry of id and returns it.
func (q *pendingOps) take(id uint64) (pendingOp, bool) {
	i, ok := q.index[id]
	if !ok {
		return pendingOp{}, false
	}
	p := q.slab[i]
	q.slab[i] = pendingOp{} // holds no cgroup or readings while free
	q.free = append(q.free, i)
	delete(q.index, id)
	if len(q.slab) > keptSlots && len(q.index) <= len(q.slab)/8 {
		q.compact()
	}
	return p, true
}

// keptSlots is the most slots the slab keeps when it has emptied: a first
// scan of thousands of cgroups has as many ops in flight, and their slots
// would otherwise stay in the heap, and double in the collector's goal.
const keptSlots = 256

// compact moves the entries in use to a slab of their size.
func (q *pendingOps) compact() {
	slab := make([]pendingOp, 0, max(2*len(q.index), 16))
	for id, i := range q.index {
		q.index[id] = int32(len(slab))
		slab = append(slab, q.slab[i])
	}
	q.slab, q.free = slab, nil
}

// len is how many ops are in flight.
func (q *pendingOps) len() int { return len(q.index) }
