/*
 * The client side shared by kvtierfs-bench's phases and life workload.
 *
 * Block contents.  A counter-based mix of every word would cost the client
 * about 0.1 s of CPU per GiB, taken on a small machine from the daemon under
 * test, so a block is one fixed pattern (generated once) with the first 8
 * bytes of every 4 KiB page replaced by a mix of (key, page).  Each block is
 * still unique (no dedup can shortcut a store), the expected bytes follow
 * from the key alone, and the check compares every byte: a stamp or a
 * pattern byte out of place, a page or a block in the wrong place, all fail.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "benchio.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define GOLDEN 0x9e3779b97f4a7c15ULL
#define PATTERN_SEED 0x6b76746965726673ULL
#define MAX_SHOWN_ERRORS 10

struct bio_conf BIO;
static unsigned char *g_pattern;       /* the unstamped block */
static atomic_uint g_shown;            /* error messages printed */

void bio_fatal(const char *fmt, ...)
{
	va_list ap;

	fputs("kvtierfs-bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void bio_fail(struct bio_tally *t, const char *path, const char *fmt, ...)
{
	char msg[256];
	unsigned n;
	va_list ap;

	atomic_fetch_add(&t->errors, 1);
	n = atomic_fetch_add(&g_shown, 1);
	if (n > MAX_SHOWN_ERRORS)
		return;
	if (n == MAX_SHOWN_ERRORS) {
		fputs("kvtierfs-bench: further errors not shown\n", stderr);
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* one fprintf per line: lines of threads do not interleave */
	fprintf(stderr, "kvtierfs-bench: %s: %s: %s\n", t->label, path, msg);
}

uint64_t bio_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t bio_ns_since(const struct timespec *t0, const struct timespec *t1)
{
	return (uint64_t)(t1->tv_sec - t0->tv_sec) * 1000000000ULL +
	       (uint64_t)t1->tv_nsec - (uint64_t)t0->tv_nsec;
}

void *bio_alloc_aligned(size_t len)
{
	void *p;

	if (posix_memalign(&p, BIO_PAGE, (len + BIO_PAGE - 1) / BIO_PAGE * BIO_PAGE))
		bio_fatal("out of memory (%zu bytes)", len);
	/* touched now, so that page faults are not timed */
	memset(p, 0, len);
	return p;
}

uint64_t bio_tmp_suffix(void)
{
	uint64_t v;

	if (getrandom(&v, sizeof(v), 0) != sizeof(v))
		bio_fatal("getrandom: %s", strerror(errno));
	return v >> 1;
}

/* ------------------------------------------------------------------ */
/* names and contents                                                 */

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

static uint64_t stamp(uint64_t key, uint64_t page)
{
	return bio_mix64(bio_mix64(key ^ PATTERN_SEED) + page * GOLDEN);
}

int bio_setup(const char *dir, const char *model, size_t block_size,
	      int odirect, int fsync)
{
	size_t nw = block_size / 8;

	BIO.dir = dir;
	BIO.block_size = block_size;
	BIO.odirect = odirect;
	BIO.fsync = fsync;
	if (snprintf(BIO.top, sizeof(BIO.top), "%s/%s_%012" PRIx64 "_r0", dir,
		     model, fnv1a(model) & (uint64_t)0xffffffffffff) >=
	    (int)sizeof(BIO.top))
		return -1;
	g_pattern = bio_alloc_aligned(block_size);
	for (size_t w = 0; w < nw; w++) {
		uint64_t v = bio_mix64(PATTERN_SEED + (w + 1) * GOLDEN);

		memcpy(g_pattern + 8 * w, &v, 8);
	}
	memset(g_pattern + 8 * nw, 0xa5, block_size % 8);
	return 0;
}

void bio_cleanup(void)
{
	free(g_pattern);
	g_pattern = NULL;
}

/* <top>/<h[0:3]>/<h[3:5]>_g0/<h>.bin, h: 64 hex standing for the sha256
 * of a token prefix. */
void bio_block_path(char *out, size_t n, uint64_t key)
{
	char h[65];

	for (int i = 0; i < 4; i++)
		snprintf(h + 16 * i, 17, "%016" PRIx64,
			 bio_mix64(key * 0xd1342543de82ef95ULL +
				   (uint64_t)(i + 1) * GOLDEN));
	snprintf(out, n, "%s/%.3s/%.2s_g0/%s.bin", BIO.top, h, h + 3, h);
}

unsigned char *bio_block_buffer(void)
{
	unsigned char *buf = bio_alloc_aligned(BIO.block_size);

	memcpy(buf, g_pattern, BIO.block_size);
	return buf;
}

void bio_fill_block(unsigned char *buf, uint64_t key)
{
	for (size_t off = 0; off < BIO.block_size; off += BIO_PAGE) {
		uint64_t v = stamp(key, off / BIO_PAGE);
		size_t n = BIO.block_size - off < 8 ? BIO.block_size - off : 8;

		memcpy(buf + off, &v, n);
	}
}

/* Index of the first byte where a and b differ, or len. */
static size_t first_diff(const unsigned char *a, const unsigned char *b,
			 size_t len)
{
	size_t i = 0;

	if (!memcmp(a, b, len))
		return len;
	while (a[i] == b[i])
		i++;
	return i;
}

long long bio_check_block(const unsigned char *buf, uint64_t key)
{
	size_t bs = BIO.block_size;

	for (size_t off = 0; off < bs; off += BIO_PAGE) {
		uint64_t v = stamp(key, off / BIO_PAGE);
		size_t end = bs - off < BIO_PAGE ? bs : off + BIO_PAGE;
		size_t n = end - off < 8 ? end - off : 8;
		size_t i = first_diff(buf + off, (const unsigned char *)&v, n);

		if (i == n)
			i += first_diff(buf + off + n, g_pattern + off + n,
					end - off - n);
		if (off + i < end)
			return (long long)(off + i);
	}
	return -1;
}

/* ------------------------------------------------------------------ */
/* the client's calls                                                 */

/* mkdir -p of the parent of path: the usual case (parent exists) costs
 * one mkdir. */
static int mkdir_parent(const char *path)
{
	char dir[PATH_MAX];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0755) == 0 || errno == EEXIST)
		return 0;
	if (errno != ENOENT || mkdir_parent(dir) < 0)
		return -1;
	return mkdir(dir, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

static int dflag(void)
{
	return BIO.odirect ? O_DIRECT : 0;
}

/* fsync of @path (@parent: of its directory), opened read-only. */
static int sync_path(struct bio_tally *t, const char *path, int parent)
{
	char dir[PATH_MAX];
	const char *p = path;
	int fd, ret = 0;

	if (parent) {
		snprintf(dir, sizeof(dir), "%s", path);
		*strrchr(dir, '/') = '\0';
		p = dir;
	}
	fd = open(p, O_RDONLY | (parent ? O_DIRECTORY : 0));
	if (fd < 0 || fsync(fd) < 0) {
		bio_fail(t, p, "%s: %s", fd < 0 ? "open to fsync" : "fsync",
			 strerror(errno));
		ret = -1;
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

int bio_store(struct bio_tally *t, const unsigned char *buf, const char *path,
	      const char *tmp)
{
	size_t bs = BIO.block_size;
	ssize_t n;
	int fd;

	if (access(path, F_OK) == 0) {
		atomic_fetch_add(&t->skipped, 1);
		return 0;
	}
	if (errno != ENOENT) {
		bio_fail(t, path, "access: %s", strerror(errno));
		return -1;
	}
	if (mkdir_parent(path) < 0) {
		bio_fail(t, path, "mkdir -p of the parent: %s", strerror(errno));
		return -1;
	}
	fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_TRUNC | dflag(), 0644);
	if (fd < 0) {
		bio_fail(t, tmp, "open: %s", strerror(errno));
		return -1;
	}
	n = write(fd, buf, bs);
	if (n != (ssize_t)bs) {
		if (n < 0)
			bio_fail(t, tmp, "write: %s", strerror(errno));
		else
			bio_fail(t, tmp, "short write: %zd of %zu bytes", n, bs);
		close(fd);
		unlink(tmp);
		return -1;
	}
	if (BIO.fsync && fsync(fd) < 0) {
		bio_fail(t, tmp, "fsync: %s", strerror(errno));
		close(fd);
		unlink(tmp);
		return -1;
	}
	if (close(fd) < 0) {
		bio_fail(t, tmp, "close: %s", strerror(errno));
		unlink(tmp);
		return -1;
	}
	if (rename(tmp, path) < 0) {
		bio_fail(t, tmp, "rename: %s", strerror(errno));
		unlink(tmp);
		return -1;
	}
	if (BIO.fsync && (sync_path(t, path, 0) < 0 || sync_path(t, path, 1) < 0))
		return -1;
	atomic_fetch_add(&t->bytes, bs);
	return 1;
}

int bio_load(struct bio_tally *t, unsigned char *buf, const char *path)
{
	size_t bs = BIO.block_size;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | dflag());
	if (fd < 0) {
		bio_fail(t, path, "open: %s", strerror(errno));
		return 0;
	}
	n = read(fd, buf, bs);
	if (n < 0) {
		bio_fail(t, path, "read: %s", strerror(errno));
		close(fd);
		return 0;
	}
	if (n < (ssize_t)bs) {
		/* vLLM takes a short block for torn and removes it */
		close(fd);
		unlink(path);
		bio_fail(t, path, "short read: %zd of %zu bytes (unlinked)", n, bs);
		return 0;
	}
	if (close(fd) < 0) {
		bio_fail(t, path, "close: %s", strerror(errno));
		return 0;
	}
	atomic_fetch_add(&t->bytes, bs);
	return 1;
}

int bio_load_checked(struct bio_tally *t, unsigned char *buf, const char *path,
		     uint64_t key)
{
	long long bad;

	if (!bio_load(t, buf, path))
		return 0;
	bad = bio_check_block(buf, key);
	if (bad < 0)
		return 1;
	atomic_fetch_add(&t->wrong, 1);
	bio_fail(t, path, "content differs from block key %" PRIu64
		 " at offset %lld", key, bad);
	return 0;
}

void bio_odirect_probe(void)
{
	char path[PATH_MAX];
	unsigned char *page = bio_alloc_aligned(BIO_PAGE);
	ssize_t n = -1;
	int fd, e;

	snprintf(path, sizeof(path), "%s/.o_direct_probe_%d.tmp", BIO.dir,
		 (int)getpid());
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_DIRECT, 0644);
	e = errno;
	if (fd >= 0) {
		n = write(fd, page, BIO_PAGE);
		e = errno;
		close(fd);
		unlink(path);
	}
	if (n != BIO_PAGE)
		bio_fatal("O_DIRECT does not work in %s (%s): use --buffered",
			  BIO.dir, n < 0 ? strerror(e) : "short write");
	free(page);
}

double bio_cpu_secs(pid_t pid)
{
	clockid_t clk;
	struct timespec ts;

	/* The process's CPU clock: all its threads, in nanoseconds, where
	 * /proc/PID/stat counts ticks of 10 ms, more than a small phase
	 * takes.  The clock's id holds the pid shifted: one past pid_max
	 * could name another clock, so the process is asked for first. */
	if ((kill(pid, 0) && errno != EPERM) || clock_getcpuclockid(pid, &clk) ||
	    clock_gettime(clk, &ts))
		return -1;
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
