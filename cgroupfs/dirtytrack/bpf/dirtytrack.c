// SPDX-License-Identifier: GPL-2.0
/*
 * dirtytrack: counts the page-cache bytes each memory cgroup dirties, wakes
 * userspace through a ring buffer when a watched cgroup's count passes a
 * threshold, remembers which inodes each cgroup dirtied, and reports the
 * creation and removal of memory cgroups.
 *
 * The hot path is writeback_dirty_folio, called from folio_account_dirtied()
 * (mm/page-writeback.c) once per folio that goes clean -> dirty, with the
 * mapping's i_pages lock held and interrupts off: it may only count and
 * record. Per folio it costs one LRU-hash lookup (the memcg's cached list of
 * watched ancestors), the loads from memcg to cgroup id (plain loads when
 * the writer dirties its own memcg's pages, else three probe reads), and
 * two array lookups and an atomic add per watched ancestor. The ancestor
 * walk, which needs a probe read per level, runs only when a memcg is first
 * seen or after the set of watched cgroups changed (config.gen).
 *
 * Maps written by userspace only: watched, wakes, config. Written by the
 * program only: counts and dirtiers (after userspace zeroes a slot),
 * memcgs, inodes, recent (userspace deletes a removed cgroup's), stats.
 * So no value is ever replaced by userspace under a concurrent atomic add.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

/* include/linux/backing-dev.h: the bdi writes back dirty pages, so
 * folio_account_dirtied() accounts them in NR_FILE_DIRTY (memory.stat). */
#define BDI_CAP_WRITEBACK (1 << 0)
#define S_IFMT 00170000
#define S_IFREG 0100000
#define S_IFBLK 0060000
#define PAGE_SHIFT 12 /* 4 KiB pages: x86-64 (and arm64 as usually configured) */

/* MAX_WATCHED_ANC bounds how far up a folio is counted: its memcg and its
 * 15 nearest ancestors. Watched cgroups further up miss folios of memcgs
 * that deep, which STAT_OVERFLOW counts (at each walk). */
#define MAX_WATCHED_ANC 16
/* INODE_REFRESH_FOLIOS: a memcg that keeps dirtying the same inode
 * re-records it every this many folios, so that the LRU keeps a streaming
 * file and its time stays recent. Counting folios rather than reading the
 * clock keeps a helper call off the hot path. */
#define INODE_REFRESH_FOLIOS 512
/* RECENT: the inodes each watched cgroup's subtree dirtied last, kept per
 * cgroup in the recent map, so that a write-out finds them with RECENT
 * lookups instead of a scan of the whole inodes map (which holds every
 * memcg's records: 26 ms for 65,536 of them). Must match Go's recentLen. */
#define RECENT 16
#define PATH_LEN 256
/* DIRTIERS: the threads each watched cgroup's own tasks dirtied with
 * last, kept per cgroup in the dirtiers map with the time each last did,
 * so that the pace finds the threads to slow without sampling every
 * thread's write_bytes. Must match Go's dirtierLen. A thread's time is
 * refreshed when the memcg's previous folio was another thread's, and
 * every DIRTIER_REFRESH_FOLIOS folios of the same one. */
#define DIRTIERS 8
#define DIRTIER_REFRESH_FOLIOS 16
/* include/linux/sched.h */
#define PF_KTHREAD 0x00200000

enum event_type {
	EVENT_WAKE = 1,
	EVENT_MKDIR = 2,
	EVENT_RMDIR = 3,
	EVENT_DIRTIER = 4,
	EVENT_LEVEL = 5,
};

/* Ring-buffer records. Every record starts with type; Go decodes them in
 * event.go (keep the layouts in step). */
struct wake_event {
	u32 type;
	u32 tid;     /* EVENT_DIRTIER: the thread that began dirtying */
	u64 id;      /* watched cgroup's id */
	u64 dirtied; /* its count when the threshold was passed; EVENT_LEVEL: its level */
	u64 ktime;   /* CLOCK_MONOTONIC, ns */
};

struct cgroup_event {
	u32 type;
	u32 level;
	u64 id;
	u64 parent; /* parent's id, 0 for a root */
	u64 ktime;
	char path[PATH_LEN]; /* as cgroup_path() gives it, NUL-terminated */
};

/* A watched cgroup's counters, in an array userspace maps (BPF_F_MMAPABLE)
 * and reads without a system call. */
struct count {
	u64 dirtied; /* bytes dirtied in the subtree since Watch */
	u64 cancelled; /* bytes of its dirty folios dropped unwritten since Watch */
	/* level: the change of the subtree's dirty+writeback since Watch, as
	 * memory.stat counts them: up where a folio is dirtied and where its
	 * writeback starts, down where it is cleaned for writeback, cleaned
	 * unwritten and where its writeback ends (the level programs, which
	 * load where the kernel allows fentry; without them only up). */
	s64 level;
	u64 level_fired; /* wake.level_seq of the last EVENT_LEVEL sent */
	u64 fired;   /* wake.seq of the last wake-up sent */
	u64 recent;  /* entries written to the recent map since Watch */
	u64 last_ino; /* the last one's inode, device and generation: a */
	u32 last_dev; /* streaming file is not written again and again */
	u32 last_gen;
};

struct wake {
	u64 above; /* wake once dirtied > above; ~0 never */
	u64 seq;   /* bumped by userspace to re-arm */
	u64 id;    /* the watched cgroup */
	u64 dirtier_seq; /* != dirtiers.fired: report the next new dirtier */
	/* Report the level once it rises above level_above or falls below
	 * level_below, once per level_seq. */
	s64 level_above;
	s64 level_below;
	u64 level_seq;
};

/* A thread of a watched cgroup that dirtied its pages, and when it last
 * did: CLOCK_MONOTONIC in milliseconds, wrapping (Go compares the age). */
struct dirtier {
	u32 tid;
	u32 ms;
};

struct dirtiers {
	u64 n;     /* entries written since Watch: t[n % DIRTIERS] is next */
	u64 fired; /* wake.dirtier_seq of the last EVENT_DIRTIER sent */
	struct dirtier t[DIRTIERS];
};

struct config {
	u32 gen; /* bumped by userspace whenever watched changes */
	u32 pad;
};

struct memcg_entry {
	u32 gen;
	u32 n;                     /* entries of slot in use: level + 1, at most MAX_WATCHED_ANC */
	u32 slot[MAX_WATCHED_ANC]; /* [k]: 1 + slot of the k-th ancestor (0: itself), 0 if unwatched */
	u64 last_ino;
	u32 last_dev;
	u32 same;     /* folios of last_ino since it was recorded */
	u32 last_gen; /* its i_generation: a new file may reuse an inode number */
	u32 last_tid; /* the thread of its own that dirtied its last folio */
	u32 tid_folios; /* folios of last_tid since its time was refreshed */
	u32 pad;
};

struct inode_key {
	u64 cgroup;
	u64 ino;
	u32 dev; /* kernel dev_t: major << 20 | minor */
	u32 pad;
};

struct inode_val {
	u32 generation;
	u32 pad;
	u64 jiffies;
};

/* The recent map: entry idx (0 to RECENT - 1) of watched cgroup id's ring,
 * entry count.recent % RECENT the next to be written. A hash, not an array,
 * so that a reader gets an entry whole: an update replaces the element. */
struct recent_key {
	u64 id;
	u32 idx;
	u32 pad;
};

struct recent_val {
	u64 ino;
	u32 dev;
	u32 generation;
};

enum stat_index {
	STAT_MISS,      /* ancestor walks */
	STAT_OVERFLOW,  /* walks of memcgs deeper than MAX_WATCHED_ANC - 1 */
	STAT_WAKE_FULL, /* wake-up ring full: retried at the next folio */
	STAT_DROPPED,   /* cgroup events lost to a full ring */
	STAT_NO_MEMCG,  /* dirtied folios not charged to a memcg */
	STAT_NR,
};

/* max_entries of the sized maps are set by the loader from Options. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, u64);   /* cgroup id */
	__type(value, u32); /* slot in counts and wakes */
} watched SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, u32);
	__type(value, struct count);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16384);
	__type(key, u32);
	__type(value, struct wake);
} wakes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16384);
	__type(key, u32);
	__type(value, struct dirtiers);
} dirtiers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u64); /* cgroup id */
	__type(value, struct memcg_entry);
} memcgs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct inode_key);
	__type(value, struct inode_val);
} inodes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct recent_key);
	__type(value, struct recent_val);
} recent SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_NR);
	__type(key, u32);
	__type(value, u64);
} stats SEC(".maps");

/* Wake-ups and cgroup events have a ring each, so that a storm of mkdirs
 * (a container runtime, a test suite) cannot delay or crowd out wake-ups. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} wakeups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

static __always_inline void stat_inc(u32 i)
{
	u64 *v = bpf_map_lookup_elem(&stats, &i);

	if (v)
		*v += 1;
}

/* cgroup_id is kn->id, the inode number of the cgroup's directory
 * (kernel/cgroup/cgroup.c, cgroup_id()). */
static __always_inline u64 cgroup_id(struct cgroup *cgrp)
{
	return BPF_CORE_READ(cgrp, kn, id);
}

/* ancestor returns cgrp->ancestors[i]; the array holds every ancestor from
 * the root (index 0) to cgrp itself (index level). */
static __always_inline struct cgroup *ancestor(struct cgroup *cgrp, int i)
{
	struct cgroup *a = NULL;
	unsigned long off = bpf_core_field_offset(struct cgroup, ancestors);

	bpf_probe_read_kernel(&a, sizeof(a), (void *)cgrp + off + i * sizeof(a));
	return a;
}

/* refresh walks the ancestors of the memcg at memcg_addr's cgroup, nearest
 * first, and caches under id, for the k-th (0: the cgroup itself), 1 + the
 * slot of it if watched, else 0. Slots sit at their distance rather than
 * packed, so the verifier sees a constant offset per iteration and the walk
 * stays linear to verify. A global function, verified once; the memcg is
 * passed as an address and read with probe reads. */
__noinline int refresh(u64 memcg_addr, u64 id, u32 gen)
{
	struct cgroup *cgrp = BPF_CORE_READ((struct mem_cgroup *)memcg_addr, css.cgroup);
	struct memcg_entry e = {.gen = gen};
	int level = BPF_CORE_READ(cgrp, level);

	stat_inc(STAT_MISS);
	if (level < 0)
		level = 0;
	if (level >= MAX_WATCHED_ANC) {
		stat_inc(STAT_OVERFLOW);
		e.n = MAX_WATCHED_ANC;
	} else {
		e.n = level + 1;
	}
	for (int k = 0; k < MAX_WATCHED_ANC; k++) {
		if (k > level)
			break;
		u64 aid = id;
		if (k > 0) {
			struct cgroup *a = ancestor(cgrp, level - k);
			if (!a)
				continue;
			aid = cgroup_id(a);
		}
		u32 *slot = bpf_map_lookup_elem(&watched, &aid);
		if (slot)
			e.slot[k] = *slot + 1;
	}
	bpf_map_update_elem(&memcgs, &id, &e, BPF_ANY);
	return 0;
}

static __always_inline void record_inode(u64 cgroup, u64 ino, u32 dev, u32 generation, u64 now)
{
	struct inode_key k = {.cgroup = cgroup, .ino = ino, .dev = dev};
	struct inode_val v = {.generation = generation, .jiffies = now};

	bpf_map_update_elem(&inodes, &k, &v, BPF_ANY);
}

/* report sends one record of type for the watched cgroup id, consuming
 * the arming seq, unless another CPU consumed it first (*firedp is no
 * longer fired). The record is reserved before the arming is consumed: if
 * the ring is full, the arming stays and the next folio tries again. */
static __always_inline void report(u64 *firedp, u64 fired, u64 seq, u32 type, u32 tid, u64 id, u64 value)
{
	struct wake_event *ev = bpf_ringbuf_reserve(&wakeups, sizeof(*ev), 0);

	if (!ev) {
		stat_inc(STAT_WAKE_FULL);
		return;
	}
	if (__sync_val_compare_and_swap(firedp, fired, seq) != fired) {
		bpf_ringbuf_discard(ev, 0);
		return;
	}
	ev->type = type;
	ev->tid = tid;
	ev->id = id;
	ev->dirtied = value;
	ev->ktime = bpf_ktime_get_ns();
	bpf_ringbuf_submit(ev, 0);
}

static __always_inline unsigned long folio_flags(struct folio *folio)
{
	/* 6.18 wraps the flags word in memdesc_flags_t. */
	if (bpf_core_field_exists(struct folio___flags_struct, flags))
		return ((struct folio___flags_struct *)folio)->flags.f;
	return ((struct folio___flags_word *)folio)->flags;
}

/* folio_pages is folio_nr_pages() (include/linux/mm.h): 1 unless the head
 * flag is set, else the count kept in the folio's second page. */
static __always_inline u64 folio_pages(struct folio *folio)
{
	unsigned long head = 1UL << bpf_core_enum_value(enum pageflags, PG_head);

	if (!(folio_flags(folio) & head))
		return 1;
	if (bpf_core_field_exists(struct folio___nr_pages, _nr_pages))
		return ((struct folio___nr_pages *)folio)->_nr_pages;
	return folio->_folio_nr_pages;
}

/* A folio's facts, for count_slot. */
struct folio_arg {
	u64 bytes;
	u64 id; /* owner memcg's cgroup */
	u64 ino;
	u64 now;
	u32 dev;
	u32 generation;
	u32 record; /* record the inode for each watched ancestor too */
	u32 pad;
};

/* record_recent writes a folio's inode into the recent ring of the watched
 * cgroup of slot c/w, unless it is the one written last. The generation
 * is compared too: a file deleted and created again often gets the same
 * inode number, and the old generation would name the deleted file, so
 * its handle would fail (ESTALE) and the new file never be written out.
 * Two CPUs may take the same test and write it twice: harmless. */
static __always_inline void record_recent(struct count *c, struct wake *w, struct folio_arg *a)
{
	if (c->last_ino == a->ino && c->last_dev == a->dev && c->last_gen == a->generation)
		return;
	c->last_ino = a->ino;
	c->last_dev = a->dev;
	c->last_gen = a->generation;
	u64 n = __sync_fetch_and_add(&c->recent, 1);
	struct recent_key k = {.id = w->id, .idx = n % RECENT};
	struct recent_val v = {.ino = a->ino, .dev = a->dev, .generation = a->generation};

	bpf_map_update_elem(&recent, &k, &v, BPF_ANY);
}

/* count_slot counts a folio for the watched cgroup in slot s, wakes
 * userspace when its count passes the threshold, and records the inode for
 * it. A global function: verified once. */
/* level_change adds delta to the level of the watched cgroup of slot c/w
 * and reports a crossing of its armed bounds, once per arming. It may run
 * in interrupt context (the end of writeback): it only adds and reserves
 * a ring record. */
static __always_inline void level_change(struct count *c, struct wake *w, s64 delta)
{
	s64 level = __sync_fetch_and_add(&c->level, delta) + delta;
	u64 seq = w->level_seq;
	u64 fired = c->level_fired;
	if (seq != fired && (level > w->level_above || level < w->level_below))
		report(&c->level_fired, fired, seq, EVENT_LEVEL, 0, w->id, level);
}

/* What folio_slots does to each watched cgroup a folio counts for. */
enum slot_op {
	OP_LEVEL = 1,  /* change its level by delta */
	OP_CANCEL = 2, /* count delta bytes of a dirty folio dropped unwritten */
};

/* change_slot does op to the watched cgroup in slot s. A global function:
 * verified once. */
__noinline int change_slot(u32 s, u32 op, s64 delta)
{
	struct count *c = bpf_map_lookup_elem(&counts, &s);
	struct wake *w = bpf_map_lookup_elem(&wakes, &s);
	if (!c || !w)
		return 0;
	if (op == OP_LEVEL)
		level_change(c, w, delta);
	else
		__sync_fetch_and_add(&c->cancelled, delta);
	return 0;
}

__noinline int count_slot(u32 s, struct folio_arg *a)
{
	if (!a)
		return 0;
	struct count *c = bpf_map_lookup_elem(&counts, &s);
	struct wake *w = bpf_map_lookup_elem(&wakes, &s);
	if (!c || !w)
		return 0;
	level_change(c, w, a->bytes);
	u64 total = __sync_fetch_and_add(&c->dirtied, a->bytes) + a->bytes;
	u64 seq = w->seq;
	u64 fired = c->fired;
	if (total > w->above && fired != seq)
		report(&c->fired, fired, seq, EVENT_WAKE, 0, w->id, total);
	if (!a->record)
		return 0;
	if (w->id != a->id)
		record_inode(w->id, a->ino, a->dev, a->generation, a->now);
	record_recent(c, w, a);
	return 0;
}

/* note_dirtier refreshes thread tid's time in the dirtiers ring of the
 * watched cgroup in slot s, or adds it there; a thread new to the ring is
 * reported once per arming (wake.dirtier_seq), so that a paced cgroup's
 * new writer is paced within a millisecond of its first folio. Two CPUs
 * may both add the same thread: harmless. A global function: verified
 * once. */
__noinline int note_dirtier(u32 s, u32 tid)
{
	struct dirtiers *d = bpf_map_lookup_elem(&dirtiers, &s);
	struct wake *w = bpf_map_lookup_elem(&wakes, &s);
	if (!d || !w)
		return 0;
	u32 ms = bpf_ktime_get_ns() / 1000000;
	for (int i = 0; i < DIRTIERS; i++) {
		if (d->t[i].tid == tid) {
			d->t[i].ms = ms;
			return 0;
		}
	}
	u64 n = __sync_fetch_and_add(&d->n, 1);
	struct dirtier *e = &d->t[n % DIRTIERS];
	e->ms = ms;
	e->tid = tid;
	u64 seq = w->dirtier_seq;
	u64 fired = d->fired;
	if (seq != fired)
		report(&d->fired, fired, seq, EVENT_DIRTIER, tid, w->id, 0);
	return 0;
}

/* writes_back reports whether the pages of an inode count in memory.stat
 * dirty (mapping_can_writeback(), include/linux/backing-dev.h): block
 * devices' inodes live on the bdev pseudo-superblock, whose s_bdi cannot
 * write back, while inode_to_bdi() gives the disk's: count them as the
 * kernel does. */
static __always_inline bool writes_back(struct inode *host)
{
	struct super_block *sb = host->i_sb;
	if (!sb)
		return false;
	if ((host->i_mode & S_IFMT) == S_IFBLK)
		return true;
	struct backing_dev_info *bdi = sb->s_bdi;
	return bdi && (bdi->capabilities & BDI_CAP_WRITEBACK);
}

/* folio_memcg_of is folio_memcg() (include/linux/memcontrol.h): mask the
 * flag bits; a kmem folio points to an obj_cgroup, and from the kernels
 * whose obj_cgroup has is_root (7.2) every folio does. NULL if the folio
 * is charged to no memcg. */
static __always_inline struct mem_cgroup *folio_memcg_of(struct folio *folio)
{
	unsigned long md = folio->memcg_data;
	unsigned long nflags = bpf_core_enum_value(enum page_memcg_data_flags, __NR_MEMCG_DATA_FLAGS);
	unsigned long kmem = bpf_core_enum_value(enum page_memcg_data_flags, MEMCG_DATA_KMEM);
	if (bpf_core_enum_value_exists(enum objext_flags, __NR_OBJEXTS_FLAGS))
		nflags = bpf_core_enum_value(enum objext_flags, __NR_OBJEXTS_FLAGS);
	void *p = (void *)(md & ~(nflags - 1));
	if (!p)
		return NULL;
	if ((md & kmem) || bpf_core_field_exists(struct obj_cgroup___lru, is_root))
		return BPF_CORE_READ((struct obj_cgroup *)p, memcg);
	return p;
}

/* memcg_entry_of returns the cached watched ancestors of the memcg id at
 * memcg, computing them when missing or stale (config.gen). */
static __always_inline struct memcg_entry *memcg_entry_of(struct mem_cgroup *memcg, u64 id)
{
	u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg)
		return NULL;
	u32 gen = cfg->gen;
	struct memcg_entry *e = bpf_map_lookup_elem(&memcgs, &id);
	if (!e || e->gen != gen) {
		refresh((u64)memcg, id, gen);
		e = bpf_map_lookup_elem(&memcgs, &id);
	}
	return e;
}

SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(dirty_folio, struct folio *folio, struct address_space *mapping)
{
	/* 7.2's verifier takes a tracepoint's pointers as possibly NULL. */
	if (!folio || !mapping)
		return 0;
	struct inode *host = mapping->host;
	if (!host || !writes_back(host))
		return 0;
	struct super_block *sb = host->i_sb;
	umode_t mode = host->i_mode;
	struct mem_cgroup *memcg = folio_memcg_of(folio);
	if (!memcg) {
		stat_inc(STAT_NO_MEMCG);
		return 0;
	}
	/* Usually the writer dirties its own memcg's pages: then its css
	 * pointer equals the folio's memcg, and the cgroup id is reached
	 * through trusted pointers with plain loads. Otherwise (a file whose
	 * pages another cgroup owns, a kernel thread) three probe reads. */
	u64 id;
	struct task_struct *task = bpf_get_current_task_btf();
	struct cgroup_subsys_state *css =
		task->cgroups->subsys[bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id)];
	bool own = (unsigned long)css == (unsigned long)memcg + bpf_core_field_offset(struct mem_cgroup, css);
	if (own) {
		id = css->cgroup->kn->id;
	} else {
		struct cgroup *cgrp = BPF_CORE_READ(memcg, css.cgroup);
		if (!cgrp)
			return 0;
		id = cgroup_id(cgrp);
	}

	struct memcg_entry *e = memcg_entry_of(memcg, id);
	if (!e)
		return 0;

	/* The threads that dirty a watched cgroup's pages, its own tasks
	 * only (as the pace holds them: act.Pacer), never a kernel thread
	 * (the flusher redirtying a folio). */
	u32 s0 = e->slot[0];
	if (own && s0 && !(task->flags & PF_KTHREAD)) {
		u32 tid = task->pid;
		if (e->last_tid != tid || ++e->tid_folios >= DIRTIER_REFRESH_FOLIOS) {
			e->last_tid = tid;
			e->tid_folios = 0;
			note_dirtier(s0 - 1, tid);
		}
	}

	struct folio_arg a = {.bytes = folio_pages(folio) << PAGE_SHIFT, .id = id};
	if ((mode & S_IFMT) == S_IFREG) {
		u64 ino = host->i_ino;
		u32 dev = sb->s_dev;
		u32 generation = host->i_generation;
		if (e->last_ino != ino || e->last_dev != dev || e->last_gen != generation ||
		    ++e->same >= INODE_REFRESH_FOLIOS) {
			u64 now = bpf_jiffies64();
			e->last_ino = ino;
			e->last_dev = dev;
			e->last_gen = generation;
			e->same = 0;
			a.ino = ino;
			a.dev = dev;
			a.now = now;
			a.generation = generation;
			a.record = 1;
			record_inode(id, ino, dev, a.generation, now);
		}
	}

	u32 n = e->n;
	for (u32 k = 0; k < MAX_WATCHED_ANC; k++) {
		if (k >= n)
			break;
		u32 s = e->slot[k];
		if (s)
			count_slot(s - 1, &a);
	}
	return 0;
}

/* folio_counts_dirty reports whether a folio's dirtiness counts in
 * memory.stat dirty: mapping_can_writeback() of its mapping, as
 * folio_account_dirtied() and folio_clear_dirty_for_io() test it. An
 * anonymous folio's mapping has its low bit set (PAGE_MAPPING_ANON). */
static __always_inline bool folio_counts_dirty(struct folio *folio)
{
	struct address_space *mapping = BPF_CORE_READ(folio, mapping);
	if (!mapping || ((unsigned long)mapping & 1))
		return false;
	struct inode *host = BPF_CORE_READ(mapping, host);
	if (!host)
		return false;
	if ((BPF_CORE_READ(host, i_mode) & S_IFMT) == S_IFBLK)
		return true;
	struct super_block *sb = BPF_CORE_READ(host, i_sb);
	if (!sb)
		return false;
	struct backing_dev_info *bdi = BPF_CORE_READ(sb, s_bdi);
	return bdi && (BPF_CORE_READ(bdi, capabilities) & BDI_CAP_WRITEBACK);
}

/* folio_slots does op with delta to every watched cgroup the memcg of
 * folio counts for. Folios charged to no memcg count for none, as in
 * memory.stat. */
static __always_inline int folio_slots(struct folio *folio, u32 op, s64 delta)
{
	struct mem_cgroup *memcg = folio_memcg_of(folio);
	if (!memcg)
		return 0;
	struct cgroup *cgrp = BPF_CORE_READ(memcg, css.cgroup);
	if (!cgrp)
		return 0;
	struct memcg_entry *e = memcg_entry_of(memcg, cgroup_id(cgrp));
	if (!e)
		return 0;
	u32 n = e->n;
	for (u32 k = 0; k < MAX_WATCHED_ANC; k++) {
		if (k >= n)
			break;
		u32 s = e->slot[k];
		if (s)
			change_slot(s - 1, op, delta);
	}
	return 0;
}

/* invalidate_folio fires from ext4_invalidate_folio() (fs/ext4/inode.c)
 * before the folio's dirty bit is cancelled: truncate_cleanup_folio() in
 * mm/truncate.c invalidates a truncated folio, then folio_cancel_dirty()
 * takes it out of memory.stat dirty unwritten (folio_account_cleaned() in
 * mm/page-writeback.c). Counting those lets userspace tell such a fall of
 * dirty+writeback (a deleted or truncated file) from written pages. Only
 * a whole folio counts: a partial invalidation keeps it dirty. xfs's
 * iomap_invalidate_folio tracepoint carries no folio: not counted. */
SEC("tp_btf/ext4_invalidate_folio")
int BPF_PROG(invalidate_folio, struct folio *folio, size_t offset, size_t length)
{
	unsigned long dirty = 1UL << bpf_core_enum_value(enum pageflags, PG_dirty);
	if (!folio || offset != 0 || !(folio_flags(folio) & dirty))
		return 0;
	u64 bytes = folio_pages(folio) << PAGE_SHIFT;
	if (length < bytes || !folio_counts_dirty(folio))
		return 0;
	return folio_slots(folio, OP_CANCEL, bytes);
}


/* The level programs (fentry and fexit, refused by kernels that forbid
 * them: the tracker then counts no level). Each follows one place where
 * mm/page-writeback.c moves NR_FILE_DIRTY or NR_WRITEBACK. */

/* folio_clear_dirty_for_io(): dirty down by the folio when it was dirty
 * and its mapping writes back; its writeback, if it starts, counts
 * apart (start_writeback). A folio redirtied instead comes back through
 * writeback_dirty_folio. */
SEC("fexit/folio_clear_dirty_for_io")
int BPF_PROG(clear_dirty_for_io, struct folio *folio, bool ret)
{
	if (!ret || !folio_counts_dirty(folio))
		return 0;
	return folio_slots(folio, OP_LEVEL, -(s64)(folio_pages(folio) << PAGE_SHIFT));
}

/* __folio_start_writeback(): writeback up, unless the folio was under
 * writeback already (6.1 allows it; 6.18 does not). Any folio, as
 * NR_WRITEBACK counts swap-out too. */
SEC("fentry/__folio_start_writeback")
int BPF_PROG(start_writeback, struct folio *folio, bool keep_write)
{
	unsigned long wb = 1UL << bpf_core_enum_value(enum pageflags, PG_writeback);
	if (folio_flags(folio) & wb)
		return 0;
	return folio_slots(folio, OP_LEVEL, folio_pages(folio) << PAGE_SHIFT);
}

/* __folio_end_writeback(), from folio_end_writeback() in mm/filemap.c, in
 * process or interrupt context: writeback down. */
SEC("fentry/__folio_end_writeback")
int BPF_PROG(end_writeback, struct folio *folio)
{
	unsigned long wb = 1UL << bpf_core_enum_value(enum pageflags, PG_writeback);
	if (!(folio_flags(folio) & wb))
		return 0;
	return folio_slots(folio, OP_LEVEL, -(s64)(folio_pages(folio) << PAGE_SHIFT));
}

/* folio_account_cleaned(), called where a dirty folio is cleaned
 * unwritten (__folio_cancel_dirty(): truncation, invalidation) and its
 * mapping writes back: dirty down. */
SEC("fentry/folio_account_cleaned")
int BPF_PROG(account_cleaned, struct folio *folio)
{
	return folio_slots(folio, OP_LEVEL, -(s64)(folio_pages(folio) << PAGE_SHIFT));
}

/* memory_hierarchy reports whether cgrp is in the hierarchy that hosts the
 * memory controller (v1: its own mount; v2: the unified hierarchy). */
static __always_inline bool memory_hierarchy(struct cgroup *cgrp)
{
	unsigned int mask = BPF_CORE_READ(cgrp, root, subsys_mask);

	return mask & (1U << bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id));
}

static __always_inline int cgroup_event(u32 type, struct cgroup *cgrp, const char *path)
{
	if (!memory_hierarchy(cgrp))
		return 0;
	struct cgroup_event *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		stat_inc(STAT_DROPPED);
		return 0;
	}
	int level = BPF_CORE_READ(cgrp, level);
	ev->type = type;
	ev->level = level;
	ev->id = cgroup_id(cgrp);
	ev->parent = 0;
	if (level > 0) {
		struct cgroup *p = ancestor(cgrp, level - 1);
		if (p)
			ev->parent = cgroup_id(p);
	}
	ev->ktime = bpf_ktime_get_ns();
	if (bpf_probe_read_kernel_str(ev->path, sizeof(ev->path), path) < 0)
		ev->path[0] = 0;
	bpf_ringbuf_submit(ev, 0);
	return 0;
}

/* cgroup_mkdir and cgroup_rmdir fire from kernel/cgroup/cgroup.c
 * (cgroup_mkdir, cgroup_destroy_locked) with the path already formatted. */
SEC("tp_btf/cgroup_mkdir")
int BPF_PROG(cgroup_mkdir, struct cgroup *cgrp, const char *path)
{
	return cgroup_event(EVENT_MKDIR, cgrp, path);
}

SEC("tp_btf/cgroup_rmdir")
int BPF_PROG(cgroup_rmdir, struct cgroup *cgrp, const char *path)
{
	if (memory_hierarchy(cgrp)) {
		u64 id = cgroup_id(cgrp);
		bpf_map_delete_elem(&memcgs, &id);
	}
	return cgroup_event(EVENT_RMDIR, cgrp, path);
}
