/*
 * kvclient: what its files share: the options, the run-wide counters and
 * state, and the functions one file offers the others (grouped by the file
 * that defines them).
 */
#ifndef KVCLIENT_H
#define KVCLIENT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define HDR_LEN 32
#define HDR_MAGIC 0x4b5654494552465aULL
#define GOLDEN 0x9e3779b97f4a7c15ULL
#define ALIGN 4096
#define MAX_SHOWN_FAILURES 20

/* ------------------------------------------------------------------ */
/* options and global state                                           */

struct options {
	const char *cmd;
	const char *dir;
	const char *model;
	uint64_t blocks, key_base, version, progress, seed;
	int version_set, size_set;
	int threads, writers, readers, rounds;
	size_t size, chunk;
	size_t size_odd; /* race, lmcache: odd versions' size (0: --size) */
	int odirect; /* -1: command default */
	int no_rename, stop_on_enospc, keep_going, no_tmp;
	long long expect, min;
	uint64_t offset;
	int mmap, report, same;
	int in_place, fsync, fsync_dir;
	const char *reread_after, *file;
	const char *manifest;	/* manifest.c: acknowledged stores, removals */
	int crash_ok, shared, pt;
};
extern struct options O;	/* main.c */

extern atomic_ullong g_failures;
extern atomic_int g_enospc_seen;
extern pthread_mutex_t g_out_mu;
extern atomic_ullong g_next;
extern atomic_ullong g_wrong;	/* block.c */

struct counters {
	atomic_ullong ops, bytes, stored, skipped, misses, touched, tmps;
};

struct worker {
	int idx;
	pthread_t tid;
	struct counters *c;
	void *(*fn)(void *);
};

/* block.c */
uint64_t mix64(uint64_t z);
void fill_block(unsigned char *buf, uint64_t size, uint64_t key, uint64_t ver);
long long check_range(const unsigned char *buf, uint64_t off, uint64_t len,
		      uint64_t key, uint64_t ver, uint64_t size);
int check_whole(const char *path, const unsigned char *buf, size_t len,
		uint64_t want_key, uint64_t want_ver, uint64_t want_size,
		uint64_t *got_key, uint64_t *got_ver);

/* names.c */
void key_hash64(uint64_t key, char out[65]);
void vllm_path(char *out, size_t n, uint64_t key);
void pt_name(char *out, size_t n, uint64_t key);
void pt_path(char *out, size_t n, uint64_t key);
int ends_with(const char *s, const char *suf);
int mkdir_parents(const char *path);

/* io.c */
unsigned char *alloc_buf(size_t len);
int dflag(void);
int write_block(int fd, const unsigned char *buf, size_t len, size_t chunk,
		size_t *done);
ssize_t read_whole(int fd, unsigned char *buf, size_t cap);

/* common.c */
void failf(const char *path, long long off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
int stopped(void);
double now_sec(void);
uint64_t rng_next(uint64_t *s);
uint64_t thread_seed(int idx);
void progress_tick(struct counters *c);
int store_enospc(const char *dest, int e);
int mount_gone(int e);
int store_stops(const char *dest, int e);
const char *errname(int e);
long long next_index(void);
void run_threads(int n, void *(*fn)(void *), struct counters *c);
void summary(const char *phase, struct counters *c, double t0,
	     const char *extra);

/* manifest.c */
enum layout { LAYOUT_BIN, LAYOUT_PT };
void manifest_open(void);
void manifest_stored(enum layout l, uint64_t key, uint64_t ver);
void manifest_removed(enum layout l, uint64_t key, uint64_t next_ver);
void verify_found(size_t idx, enum layout l, uint64_t key, uint64_t ver);
void verify_wrong(size_t idx);
void verify_files(size_t n);
int manifest_check(const char **extra);
size_t manifest_keys(uint64_t **keys);

/* the commands: vllm.c, llmd.c, concurrent.c, verify.c, manifest.c */
int cmd_vllm_store(void);
int cmd_vllm_load(void);
int cmd_probe(void);
int cmd_paths(void);
int cmd_llmd_store(const char *phase);
int cmd_llmd_load(void);
int cmd_llmd(void);
int cmd_concurrent(void);
int cmd_verify(void);
int cmd_evict(void);

#endif
