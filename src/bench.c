/*
 * kvtierfs-bench: time the vLLM file-tier access pattern (CLIENTS.md)
 * against any directory, so that a plain directory on the lower disk and a
 * kvtierfs mount can be compared call for call.
 *
 * Phases, each over the same N blocks, by worker threads that take block
 * indices from one atomic counter:
 *
 *   store        access(F_OK) (present: skipped), mkdir -p of the parent,
 *                open(<final>_<u63>.tmp, O_CREAT|O_EXCL|O_WRONLY|O_TRUNC
 *                [|O_DIRECT]), one write of the block, close, rename
 *   lookup       access(F_OK) of every stored name (must exist)
 *   lookup-miss  access(F_OK) of names never stored (must be ENOENT)
 *   load         open(O_RDONLY[|O_DIRECT]), one read of the whole block
 *                from offset 0 into an aligned buffer (short read: close,
 *                unlink, failure), close; --check compares every byte
 *
 * One latency per block (CLOCK_MONOTONIC around the calls above only, not
 * around content generation or checking) and one line per phase on stdout.
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
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096
#define GOLDEN 0x9e3779b97f4a7c15ULL
#define PATTERN_SEED 0x6b76746965726673ULL
#define MISS_BIT (1ULL << 63)          /* lookup-miss keys: never stored */
#define MAX_BLOCK_SIZE (1ULL << 30)
#define MAX_THREADS 1024
#define MAX_SHOWN_ERRORS 10

static const char usage_text[] =
"usage: kvtierfs-bench --dir DIR [OPTIONS]\n"
"\n"
"Replays the vLLM file-tier client against DIR and times it:\n"
"  store        access, mkdir -p, open tmp O_EXCL, one write, close, rename\n"
"  lookup       access(F_OK) of the stored names\n"
"  lookup-miss  access(F_OK) of names never stored\n"
"  load         open, one read of the whole block, close\n"
"Blocks go to DIR/<model>_<12 hex>_r0/<3 hex>/<2 hex>_g0/<64 hex>.bin.\n"
"\n"
"Options:\n"
"  --dir DIR            directory to work in (must exist; required)\n"
"  --block-size BYTES   block size, K/M/G suffixes (default 2M)\n"
"  --blocks N           number of blocks (default 512)\n"
"  --threads N          store and load threads (default 16)\n"
"  --lookup-threads N   lookup threads (default 1, as vLLM)\n"
"  --odirect            O_DIRECT stores and loads (default)\n"
"  --buffered           no O_DIRECT\n"
"  --check              load: compare every byte with the expected content\n"
"  --phases LIST        comma list of store,lookup,lookup-miss,load, run in\n"
"                       that order (default: all four)\n"
"  --drop-caches        sync and write 3 to /proc/sys/vm/drop_caches before\n"
"                       the first load run (cold load; needs root)\n"
"  --lookup-after SEC   wait SEC seconds after the store before the lookups\n"
"                       (default 0): a server looks blocks up long after it\n"
"                       stored them, past the kernel's short timeouts\n"
"  --repeat-load N      run the load phase N times (default 1); the runs\n"
"                       after the first are labelled load-2, load-3, ...\n"
"  --key-base N         first block key (default 0): keys BASE..BASE+N-1\n"
"  --model NAME         model part of the top directory (default kvbench)\n"
"  --fsync              store: make each block durable as a careful client\n"
"                       does on any file system: fsync of the temp file\n"
"                       before close, and after the rename fsync of the\n"
"                       block under its final name and of its directory\n"
"  --quiet              no header line (errors are still described)\n"
"  --help               this text\n"
"\n"
"Output, one line per phase:\n"
"  <phase>: ops=N bytes=N secs=S GB/s=R ops/s=R p50_us=L p99_us=L max_us=L\n"
"           errors=N [skipped=N]\n"
"Exit: 0 no errors, 1 an operation failed or a check failed, 2 bad usage.\n";

enum phase { PH_STORE, PH_LOOKUP, PH_LOOKUP_MISS, PH_LOAD, PH_COUNT };

static const char *const phase_names[PH_COUNT] = {
	[PH_STORE] = "store",
	[PH_LOOKUP] = "lookup",
	[PH_LOOKUP_MISS] = "lookup-miss",
	[PH_LOAD] = "load",
};

static struct {
	const char *dir;
	const char *model;
	size_t block_size;
	uint64_t blocks, key_base;
	unsigned threads, lookup_threads, repeat_load, lookup_after;
	int odirect, check, drop_caches, quiet, fsync;
	int run[PH_COUNT];
} O = {
	.model = "kvbench",
	.block_size = 2u << 20,
	.blocks = 512,
	.threads = 16,
	.lookup_threads = 1,
	.repeat_load = 1,
	.odirect = 1,
};

static char g_top[PATH_MAX - 128];     /* DIR/<model>_<12 hex>_r0 */
static unsigned char *g_pattern;       /* the unstamped block */
static atomic_uint g_shown;            /* error messages printed */

/* One run of one phase. */
struct run {
	enum phase phase;
	const char *label;
	atomic_uint_fast64_t next;      /* next block index to take */
	atomic_uint_fast64_t bytes, errors, skipped;
	uint64_t *lat_ns;               /* one per block */
	pthread_barrier_t start;
};

struct worker {
	struct run *run;
	pthread_t tid;
	unsigned char *buf;             /* block buffer, page aligned */
	uint64_t tmp_suffix;            /* random per thread and reused */
	struct timespec t_start, t_end; /* when this worker began and ended */
};

/* ------------------------------------------------------------------ */
/* helpers                                                            */

static void usage_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

static void usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("kvtierfs-bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see --help)\n", stderr);
	exit(2);
}

static void fatal(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

static void fatal(const char *fmt, ...)
{
	va_list ap;

	fputs("kvtierfs-bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* Counts an error of run r; the first few are described on stderr. */
static void fail(struct run *r, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void fail(struct run *r, const char *path, const char *fmt, ...)
{
	char msg[256];
	unsigned n;
	va_list ap;

	atomic_fetch_add(&r->errors, 1);
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
	fprintf(stderr, "kvtierfs-bench: %s: %s: %s\n", r->label, path, msg);
}

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t ns_since(const struct timespec *t0, const struct timespec *t1)
{
	return (uint64_t)(t1->tv_sec - t0->tv_sec) * 1000000000ULL +
	       (uint64_t)t1->tv_nsec - (uint64_t)t0->tv_nsec;
}

static int ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec ||
	       (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void *alloc_aligned(size_t len)
{
	void *p;

	if (posix_memalign(&p, PAGE, (len + PAGE - 1) / PAGE * PAGE))
		fatal("out of memory (%zu bytes)", len);
	/* touched now, so that page faults are not timed */
	memset(p, 0, len);
	return p;
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

/* <top>/<h[0:3]>/<h[3:5]>_g0/<h>.bin, h: 64 hex standing for the sha256
 * of a token prefix. */
static void block_path(char *out, size_t n, uint64_t key)
{
	char h[65];

	for (int i = 0; i < 4; i++)
		snprintf(h + 16 * i, 17, "%016" PRIx64,
			 mix64(key * 0xd1342543de82ef95ULL +
			       (uint64_t)(i + 1) * GOLDEN));
	snprintf(out, n, "%s/%.3s/%.2s_g0/%s.bin", g_top, h, h + 3, h);
}

static uint64_t stamp(uint64_t key, uint64_t page)
{
	return mix64(mix64(key ^ PATTERN_SEED) + page * GOLDEN);
}

static void make_pattern(void)
{
	size_t nw = O.block_size / 8;
	uint64_t w;

	g_pattern = alloc_aligned(O.block_size);
	for (w = 0; w < nw; w++) {
		uint64_t v = mix64(PATTERN_SEED + (w + 1) * GOLDEN);

		memcpy(g_pattern + 8 * w, &v, 8);
	}
	memset(g_pattern + 8 * nw, 0xa5, O.block_size % 8);
}

/* Turns buf, which holds the pattern stamped for any key, into the block
 * of key: only the stamps change. */
static void fill_block(unsigned char *buf, uint64_t key)
{
	for (size_t off = 0; off < O.block_size; off += PAGE) {
		uint64_t v = stamp(key, off / PAGE);
		size_t n = O.block_size - off < 8 ? O.block_size - off : 8;

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

/* Offset of the first byte of buf that differs from the block of key, or
 * -1. */
static long long check_block(const unsigned char *buf, uint64_t key)
{
	for (size_t off = 0; off < O.block_size; off += PAGE) {
		uint64_t v = stamp(key, off / PAGE);
		size_t end = O.block_size - off < PAGE ? O.block_size : off + PAGE;
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
	return O.odirect ? O_DIRECT : 0;
}

/* fsync of @path (@parent: of its directory), opened read-only. */
static int sync_path(struct run *r, const char *path, int parent)
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
		fail(r, p, "%s: %s", fd < 0 ? "open to fsync" : "fsync", strerror(errno));
		ret = -1;
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

static void op_store(struct worker *w, const char *path, const char *tmp)
{
	struct run *r = w->run;
	ssize_t n;
	int fd;

	if (access(path, F_OK) == 0) {
		atomic_fetch_add(&r->skipped, 1);
		return;
	}
	if (errno != ENOENT) {
		fail(r, path, "access: %s", strerror(errno));
		return;
	}
	if (mkdir_parent(path) < 0) {
		fail(r, path, "mkdir -p of the parent: %s", strerror(errno));
		return;
	}
	fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_TRUNC | dflag(), 0644);
	if (fd < 0) {
		fail(r, tmp, "open: %s", strerror(errno));
		return;
	}
	n = write(fd, w->buf, O.block_size);
	if (n != (ssize_t)O.block_size) {
		if (n < 0)
			fail(r, tmp, "write: %s", strerror(errno));
		else
			fail(r, tmp, "short write: %zd of %zu bytes", n,
			     O.block_size);
		close(fd);
		unlink(tmp);
		return;
	}
	if (O.fsync && fsync(fd) < 0) {
		fail(r, tmp, "fsync: %s", strerror(errno));
		close(fd);
		unlink(tmp);
		return;
	}
	if (close(fd) < 0) {
		fail(r, tmp, "close: %s", strerror(errno));
		unlink(tmp);
		return;
	}
	if (rename(tmp, path) < 0) {
		fail(r, tmp, "rename: %s", strerror(errno));
		unlink(tmp);
		return;
	}
	if (O.fsync && (sync_path(r, path, 0) < 0 || sync_path(r, path, 1) < 0))
		return;
	atomic_fetch_add(&r->bytes, O.block_size);
}

static void op_lookup(struct worker *w, const char *path, int want_hit)
{
	if (access(path, F_OK) == 0) {
		if (!want_hit)
			fail(w->run, path, "access: exists, but was never stored");
	} else if (want_hit || errno != ENOENT) {
		fail(w->run, path, "access: %s", strerror(errno));
	}
}

/* Returns 1 if the block was read whole (and is to be checked). */
static int op_load(struct worker *w, const char *path)
{
	struct run *r = w->run;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | dflag());
	if (fd < 0) {
		fail(r, path, "open: %s", strerror(errno));
		return 0;
	}
	n = read(fd, w->buf, O.block_size);
	if (n < 0) {
		fail(r, path, "read: %s", strerror(errno));
		close(fd);
		return 0;
	}
	if (n < (ssize_t)O.block_size) {
		/* vLLM takes a short block for torn and removes it */
		close(fd);
		unlink(path);
		fail(r, path, "short read: %zd of %zu bytes (unlinked)", n,
		     O.block_size);
		return 0;
	}
	if (close(fd) < 0) {
		fail(r, path, "close: %s", strerror(errno));
		return 0;
	}
	atomic_fetch_add(&r->bytes, O.block_size);
	return 1;
}

/* ------------------------------------------------------------------ */
/* phases                                                             */

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->run;
	char path[PATH_MAX], tmp[PATH_MAX + 32];
	struct timespec t0, t1;
	uint64_t i;

	pthread_barrier_wait(&r->start);
	clock_gettime(CLOCK_MONOTONIC, &w->t_start);
	while ((i = atomic_fetch_add(&r->next, 1)) < O.blocks) {
		uint64_t key = O.key_base + i;
		int loaded = 0;

		/* names and contents are made before the clock starts: they
		 * are the client's business, not the file system's */
		block_path(path, sizeof(path),
			   r->phase == PH_LOOKUP_MISS ? key | MISS_BIT : key);
		if (r->phase == PH_STORE) {
			snprintf(tmp, sizeof(tmp), "%s_%" PRIu64 ".tmp", path,
				 w->tmp_suffix);
			fill_block(w->buf, key);
		}
		clock_gettime(CLOCK_MONOTONIC, &t0);
		switch (r->phase) {
		case PH_STORE:
			op_store(w, path, tmp);
			break;
		case PH_LOOKUP:
		case PH_LOOKUP_MISS:
			op_lookup(w, path, r->phase == PH_LOOKUP);
			break;
		case PH_LOAD:
			loaded = op_load(w, path);
			break;
		case PH_COUNT:
			break;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		r->lat_ns[i] = ns_since(&t0, &t1);
		if (loaded && O.check) {
			long long bad = check_block(w->buf, key);

			if (bad >= 0)
				fail(r, path, "content differs from block key %"
				     PRIu64 " at offset %lld", key, bad);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &w->t_end);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of the sorted v[0..n), in microseconds. */
static double pct_us(const uint64_t *v, uint64_t n, unsigned p)
{
	uint64_t rank = (n * p + 99) / 100;

	return n ? (double)v[rank ? rank - 1 : 0] / 1e3 : 0;
}

static void drop_caches(void)
{
	int fd;

	sync();
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd < 0 || write(fd, "3\n", 2) != 2)
		fatal("--drop-caches: writing /proc/sys/vm/drop_caches: %s",
		      strerror(errno));
	close(fd);
}

/* vLLM writes one O_DIRECT page before it trusts O_DIRECT on a tier. */
static void odirect_probe(void)
{
	char path[PATH_MAX];
	unsigned char *page = alloc_aligned(PAGE);
	ssize_t n = -1;
	int fd, e;

	snprintf(path, sizeof(path), "%s/.o_direct_probe_%d.tmp", O.dir,
		 (int)getpid());
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_DIRECT, 0644);
	e = errno;
	if (fd >= 0) {
		n = write(fd, page, PAGE);
		e = errno;
		close(fd);
		unlink(path);
	}
	if (n != PAGE)
		fatal("O_DIRECT does not work in %s (%s): use --buffered",
		      O.dir, n < 0 ? strerror(e) : "short write");
	free(page);
}

/* Runs one phase and prints its line; returns its error count. */
static uint64_t run_phase(enum phase ph, const char *label)
{
	unsigned nthreads = ph == PH_LOOKUP || ph == PH_LOOKUP_MISS ?
			    O.lookup_threads : O.threads;
	struct worker *w = calloc(nthreads, sizeof(*w));
	struct run r = { .phase = ph, .label = label };
	struct timespec t0 = { 0 }, t1 = { 0 };
	uint64_t errors, ops = O.blocks;
	double secs;
	unsigned t;
	int e;

	r.lat_ns = calloc(O.blocks, sizeof(*r.lat_ns));
	if (!w || !r.lat_ns)
		fatal("out of memory");
	pthread_barrier_init(&r.start, NULL, nthreads + 1);
	if (ph == PH_STORE && O.odirect)
		odirect_probe();
	for (t = 0; t < nthreads; t++) {
		w[t].run = &r;
		if (ph == PH_STORE) {
			w[t].buf = alloc_aligned(O.block_size);
			memcpy(w[t].buf, g_pattern, O.block_size);
			if (getrandom(&w[t].tmp_suffix, sizeof(w[t].tmp_suffix),
				      0) != sizeof(w[t].tmp_suffix))
				fatal("getrandom: %s", strerror(errno));
			w[t].tmp_suffix >>= 1;         /* u63 */
		} else if (ph == PH_LOAD) {
			w[t].buf = alloc_aligned(O.block_size);
		}
		e = pthread_create(&w[t].tid, NULL, worker_main, &w[t]);
		if (e)
			fatal("pthread_create: %s", strerror(e));
	}
	pthread_barrier_wait(&r.start);
	/* the phase lasts from the first worker's start to the last one's
	 * end: thread creation is not timed */
	for (t = 0; t < nthreads; t++) {
		pthread_join(w[t].tid, NULL);
		free(w[t].buf);
		if (!t || ts_before(&w[t].t_start, &t0))
			t0 = w[t].t_start;
		if (!t || ts_before(&t1, &w[t].t_end))
			t1 = w[t].t_end;
	}
	secs = (double)ns_since(&t0, &t1) / 1e9;
	qsort(r.lat_ns, ops, sizeof(*r.lat_ns), cmp_u64);
	errors = atomic_load(&r.errors);

	printf("%s: ops=%" PRIu64 " bytes=%" PRIu64 " secs=%.3f GB/s=%.3f "
	       "ops/s=%.1f p50_us=%.1f p99_us=%.1f max_us=%.1f errors=%" PRIu64,
	       label, ops, (uint64_t)atomic_load(&r.bytes), secs,
	       secs > 0 ? (double)atomic_load(&r.bytes) / secs / 1e9 : 0,
	       secs > 0 ? (double)ops / secs : 0,
	       pct_us(r.lat_ns, ops, 50), pct_us(r.lat_ns, ops, 99),
	       pct_us(r.lat_ns, ops, 100), errors);
	if (ph == PH_STORE)
		printf(" skipped=%" PRIu64, (uint64_t)atomic_load(&r.skipped));
	putchar('\n');
	fflush(stdout);

	pthread_barrier_destroy(&r.start);
	free(r.lat_ns);
	free(w);
	return errors;
}

/* ------------------------------------------------------------------ */
/* command line                                                       */

static uint64_t parse_u64(const char *opt, const char *s, uint64_t lo,
			  uint64_t hi)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (!*s || *s == '-' || *end || errno || v < lo || v > hi)
		usage_error("%s: '%s' is not a number from %" PRIu64 " to %"
			    PRIu64, opt, s, lo, hi);
	return v;
}

/* BYTES with an optional K, M or G (powers of 1024; "KiB", "k" too). */
static size_t parse_size(const char *opt, const char *s)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (end != s && *s != '-' && !errno) {
		switch (*end) {
		case 'k': case 'K': shift = 10; end++; break;
		case 'm': case 'M': shift = 20; end++; break;
		case 'g': case 'G': shift = 30; end++; break;
		}
		if (shift && (!strcmp(end, "iB") || !strcmp(end, "B")))
			end += strlen(end);
		if (!*end && v && v <= MAX_BLOCK_SIZE >> shift)
			return (size_t)(v << shift);
	}
	usage_error("%s: '%s' is not a size from 1 to 1G (BYTES, or with a "
		    "K, M or G suffix)", opt, s);
}

static void parse_phases(const char *list)
{
	char buf[256], *save, *tok;

	memset(O.run, 0, sizeof(O.run));
	if (snprintf(buf, sizeof(buf), "%s", list) >= (int)sizeof(buf))
		usage_error("--phases: list too long");
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		int p;

		for (p = 0; p < PH_COUNT && strcmp(tok, phase_names[p]); p++)
			;
		if (p == PH_COUNT)
			usage_error("--phases: unknown phase '%s' (store, "
				    "lookup, lookup-miss, load)", tok);
		O.run[p] = 1;
	}
	for (int p = 0; p < PH_COUNT; p++)
		if (O.run[p])
			return;
	usage_error("--phases: no phase given");
}

static void parse_args(int argc, char **argv)
{
	struct stat st;
	int i;

	for (int p = 0; p < PH_COUNT; p++)
		O.run[p] = 1;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL;
		const char *eq = strchr(a, '=');
		char name[32];

		/* --opt VALUE and --opt=VALUE */
		if (eq && eq - a < (int)sizeof(name)) {
			snprintf(name, sizeof(name), "%.*s", (int)(eq - a), a);
			a = name;
			val = eq + 1;
		}
#define FLAG(s) (!strcmp(a, s) && !val)
#define ARG(s) (!strcmp(a, s) && (val || \
		(i + 1 < argc ? (val = argv[++i]) : \
		 (usage_error("%s needs a value", s), NULL))))
		if (FLAG("--help") || FLAG("-h")) {
			fputs(usage_text, stdout);
			exit(0);
		} else if (ARG("--dir")) {
			O.dir = val;
		} else if (ARG("--block-size")) {
			O.block_size = parse_size(a, val);
		} else if (ARG("--blocks")) {
			O.blocks = parse_u64(a, val, 1, 1ULL << 32);
		} else if (ARG("--threads")) {
			O.threads = (unsigned)parse_u64(a, val, 1, MAX_THREADS);
		} else if (ARG("--lookup-threads")) {
			O.lookup_threads = (unsigned)parse_u64(a, val, 1,
							       MAX_THREADS);
		} else if (FLAG("--odirect")) {
			O.odirect = 1;
		} else if (FLAG("--buffered")) {
			O.odirect = 0;
		} else if (FLAG("--check")) {
			O.check = 1;
		} else if (ARG("--phases")) {
			parse_phases(val);
		} else if (FLAG("--drop-caches")) {
			O.drop_caches = 1;
		} else if (ARG("--lookup-after")) {
			O.lookup_after = (unsigned)parse_u64(a, val, 0, 86400);
		} else if (ARG("--repeat-load")) {
			O.repeat_load = (unsigned)parse_u64(a, val, 1, 1000);
		} else if (ARG("--key-base")) {
			O.key_base = parse_u64(a, val, 0, 1ULL << 62);
		} else if (ARG("--model")) {
			O.model = val;
		} else if (FLAG("--quiet")) {
			O.quiet = 1;
		} else if (FLAG("--fsync")) {
			O.fsync = 1;
		} else {
			usage_error("unknown argument '%s'", argv[i]);
		}
#undef FLAG
#undef ARG
	}
	if (!O.dir)
		usage_error("--dir DIR is required");
	if (stat(O.dir, &st) < 0)
		usage_error("--dir %s: %s", O.dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		usage_error("--dir %s: not a directory", O.dir);
	if (O.odirect && O.block_size % PAGE)
		usage_error("--block-size %zu: O_DIRECT needs a multiple of %d "
			    "(or use --buffered)", O.block_size, PAGE);
	if (!*O.model || strchr(O.model, '/'))
		usage_error("--model: a name without '/' is needed");
	if (O.drop_caches && access("/proc/sys/vm/drop_caches", W_OK) < 0)
		usage_error("--drop-caches: cannot write "
			    "/proc/sys/vm/drop_caches: %s (needs root)",
			    strerror(errno));
	if (snprintf(g_top, sizeof(g_top), "%s/%s_%012" PRIx64 "_r0", O.dir,
		     O.model, fnv1a(O.model) & (uint64_t)0xffffffffffff) >=
	    (int)sizeof(g_top))
		usage_error("--dir and --model: path too long");
}

int main(int argc, char **argv)
{
	uint64_t errors = 0;

	parse_args(argc, argv);
	if (!O.quiet)
		printf("# kvtierfs-bench dir=%s block-size=%zu blocks=%" PRIu64
		       " threads=%u lookup-threads=%u io=%s check=%s "
		       "key-base=%" PRIu64 "\n", O.dir, O.block_size, O.blocks,
		       O.threads, O.lookup_threads,
		       O.odirect ? "direct" : "buffered",
		       O.check ? "yes" : "no", O.key_base);
	make_pattern();
	if (O.run[PH_STORE])
		errors += run_phase(PH_STORE, "store");
	if (O.run[PH_LOOKUP] && O.lookup_after)
		sleep(O.lookup_after);
	if (O.run[PH_LOOKUP])
		errors += run_phase(PH_LOOKUP, "lookup");
	if (O.run[PH_LOOKUP_MISS])
		errors += run_phase(PH_LOOKUP_MISS, "lookup-miss");
	for (unsigned n = 1; O.run[PH_LOAD] && n <= O.repeat_load; n++) {
		char label[32];

		if (n == 1 && O.drop_caches)
			drop_caches();
		if (n == 1)
			snprintf(label, sizeof(label), "load");
		else
			snprintf(label, sizeof(label), "load-%u", n);
		errors += run_phase(PH_LOAD, label);
	}
	free(g_pattern);
	return errors ? 1 : 0;
}
