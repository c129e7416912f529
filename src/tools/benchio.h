/* What kvtierfs-bench's phases and its life workload share: the block
 * names and contents of a vLLM-like client and the calls it makes to store
 * and load a block.  Nothing of kvtierfs: it runs on any directory. */
#ifndef KVT_BENCHIO_H
#define KVT_BENCHIO_H

#include <limits.h>
#include <sys/types.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define BIO_PAGE 4096

/* Set by bio_setup() before any thread starts, read-only after. */
struct bio_conf {
	const char *dir;
	char top[PATH_MAX - 128];      /* DIR/<model>_<12 hex>_r0 */
	size_t block_size;
	int odirect, fsync;
};
extern struct bio_conf BIO;

/* What a run of calls did; the first few errors are described on
 * stderr, under the label. */
struct bio_tally {
	const char *label;
	atomic_uint_fast64_t bytes, errors, skipped, wrong;
};

void bio_fatal(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
void bio_fail(struct bio_tally *t, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

uint64_t bio_mix64(uint64_t z);
uint64_t bio_ns_since(const struct timespec *t0, const struct timespec *t1);
void *bio_alloc_aligned(size_t len);

/* Returns -1 if DIR/<model>... is too long for a path. */
int bio_setup(const char *dir, const char *model, size_t block_size,
	      int odirect, int fsync);
void bio_cleanup(void);

void bio_block_path(char *out, size_t n, uint64_t key);
/* A block buffer holding the pattern: bio_fill_block() then changes only
 * the stamps of each page. */
unsigned char *bio_block_buffer(void);
void bio_fill_block(unsigned char *buf, uint64_t key);
/* Offset of the first byte of buf that differs from block key, or -1. */
long long bio_check_block(const unsigned char *buf, uint64_t key);
/* A random u63 for a thread's temp names. */
uint64_t bio_tmp_suffix(void);

/* Stores the block in buf under path as vLLM does: access (present:
 * skipped), mkdir -p, open tmp O_EXCL, one write, close, rename.
 * 1 stored, 0 skipped, -1 failed (counted). */
int bio_store(struct bio_tally *t, const unsigned char *buf, const char *path,
	      const char *tmp);
/* open, one read of the whole block into buf, close: 1 if read whole. */
int bio_load(struct bio_tally *t, unsigned char *buf, const char *path);
/* bio_load, then every byte compared with block key (a difference is
 * counted as wrong and as an error). */
int bio_load_checked(struct bio_tally *t, unsigned char *buf, const char *path,
		     uint64_t key);
/* vLLM writes one O_DIRECT page before it trusts O_DIRECT on a tier:
 * exits with a message if that fails. */
void bio_odirect_probe(void);

/* CPU seconds (user + system) process @pid has used so far; -1 when it
 * cannot be read (gone). */
double bio_cpu_secs(pid_t pid);

#endif
