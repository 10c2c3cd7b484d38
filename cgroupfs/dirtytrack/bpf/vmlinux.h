/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vmlinux.h: the few kernel types dirtytrack.c reads, cut down by hand from
 * `bpftool btf dump file /sys/kernel/btf/vmlinux format c` of Debian's
 * 6.1.0-57 and of the 6.18 development host, and from Debian's 7.2.13
 * headers. Every struct is
 * preserve_access_index: the compiler emits CO-RE relocations by field name,
 * and the loader resolves offsets, sizes and enum values against the running
 * kernel's BTF, so the layouts below need only the fields used, in any order.
 *
 * Fields that differ between kernels come in "___flavor" variants (libbpf's
 * convention: the suffix is ignored when matching names), chosen at load time
 * with bpf_core_field_exists / bpf_core_type_exists.
 */
#ifndef MEMCGD_VMLINUX_H
#define MEMCGD_VMLINUX_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s64 s64;
typedef __u32 dev_t;
typedef unsigned long size_t;
typedef unsigned short umode_t;
typedef _Bool bool;
#define true 1
#define false 0

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};

enum {
	BPF_F_MMAPABLE = 1U << 10,
};

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_RINGBUF = 27,
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

/* include/linux/backing-dev-defs.h */
struct backing_dev_info {
	unsigned int capabilities;
};

/* include/linux/fs.h */
struct super_block {
	dev_t s_dev;
	struct backing_dev_info *s_bdi;
};

struct inode {
	umode_t i_mode;
	struct super_block *i_sb;
	unsigned long i_ino;
	__u32 i_generation;
};

struct address_space {
	struct inode *host;
};

/* include/linux/mm_types.h. 6.18 wraps the page flags in memdesc_flags_t
 * and renames the large folio's page count _folio_nr_pages to _nr_pages. */
typedef struct {
	unsigned long f;
} memdesc_flags_t;

struct folio {
	struct address_space *mapping;
	unsigned long memcg_data;
	unsigned int _folio_nr_pages;
};

struct folio___flags_word {
	unsigned long flags;
};

struct folio___flags_struct {
	memdesc_flags_t flags;
};

struct folio___nr_pages {
	unsigned int _nr_pages;
};

/* include/linux/page-flags.h */
enum pageflags {
	PG_dirty = 4,
	PG_writeback = 3,
	PG_head = 16,
};

/* include/linux/memcontrol.h */
enum page_memcg_data_flags {
	MEMCG_DATA_KMEM = 2,
	__NR_MEMCG_DATA_FLAGS = 4,
};

/* include/linux/memcontrol.h of 7.2: folio_objcg() masks
 * OBJEXTS_FLAGS_MASK, __NR_OBJEXTS_FLAGS - 1. */
enum objext_flags {
	__NR_OBJEXTS_FLAGS = 8,
};

/* include/linux/kernfs.h */
struct kernfs_node {
	u64 id;
};

/* include/linux/cgroup-defs.h */
struct cgroup_subsys_state {
	struct cgroup *cgroup;
};

enum cgroup_subsys_id {
	memory_cgrp_id = 4,
};

struct cgroup_root {
	unsigned int subsys_mask;
};

struct cgroup {
	int level;
	struct kernfs_node *kn;
	struct cgroup_root *root;
	struct cgroup *ancestors[0];
};

struct mem_cgroup {
	struct cgroup_subsys_state css;
};

struct obj_cgroup {
	struct mem_cgroup *memcg;
};

/* From the kernels where every charged folio's memcg_data points to an
 * obj_cgroup, LRU folios too (7.2's folio_memcg() is
 * obj_cgroup_memcg(folio_objcg(folio))), which gave obj_cgroup is_root. */
struct obj_cgroup___lru {
	_Bool is_root;
};

/* include/linux/cgroup-defs.h, include/linux/sched.h. The array's length
 * (CGROUP_SUBSYS_COUNT) varies by kernel config; only index
 * memory_cgrp_id is read. */
struct css_set {
	struct cgroup_subsys_state *subsys[14];
};

struct task_struct {
	unsigned int flags;
	int pid;
	struct css_set *cgroups;
};

#pragma clang attribute pop

#endif /* MEMCGD_VMLINUX_H */
