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
 * Block names and contents: benchio.c.  --life: life.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "benchio.h"
#include "life.h"
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
#include <signal.h>
#include <unistd.h>

#define MISS_BIT (1ULL << 63)          /* lookup-miss keys: never stored */
#define MAX_BLOCK_SIZE (1ULL << 30)
#define MAX_THREADS 1024

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
"  --cpu-of PID         each phase line also gives the CPU seconds process\n"
"                       PID (the file system's daemon) used during it\n"
"  --key-base N         first block key (default 0): keys BASE..BASE+N-1\n"
"  --contents N         only N different block contents: block k holds the\n"
"                       bytes of key BASE + (k - BASE) mod N, so stores past\n"
"                       the first N store bytes already stored (dedup)\n"
"  --model NAME         model part of the top directory (default kvbench)\n"
"  --fsync              store: make each block durable as a careful client\n"
"                       does on any file system: fsync of the temp file\n"
"                       before close, and after the rename fsync of the\n"
"                       block under its final name and of its directory\n"
"  --quiet              no header line (errors are still described)\n"
"  --life               a server's life instead of the phases: prompt\n"
"                       families, lookups until the first miss, loads of\n"
"                       the hits (every byte checked), stores of the rest\n"
"                       (see kvtierfs-bench(1)); --blocks is then the number\n"
"                       of new blocks in the stream (default: no limit)\n"
"  --duration SEC       --life: stop after SEC seconds (default 60 unless\n"
"                       --blocks is given)\n"
"  --capacity N         --life: keep N blocks, unlinking the least recently\n"
"                       used, as a server's evictor does (default: all)\n"
"  --families N         --life: prompt families (default 64)\n"
"  --zipf S             --life: their popularity ~ 1/rank^S (default 1.0)\n"
"  --seed N             --life: the stream's seed (default 1)\n"
"  --interval SEC       --life: seconds between progress lines (default 5)\n"
"  --pid PID            --life: sample this process's RSS and open fds, and\n"
"                       give its CPU seconds (cpu_s)\n"
"  --json               --life: one JSON document (summary, series) instead\n"
"                       of lines\n"
"  --requests N         --life: stop after N requests\n"
"  --scan PCT           --life: PCT% of the requests are long documents read\n"
"                       once (32-96 new blocks never asked for again)\n"
"                       (default 0; 20 with --simulate)\n"
"  --lru-blocks N       --life: also play the stream the run played through\n"
"                       an exact LRU of N blocks (no files) and report its\n"
"                       hit rate and the run's to it; again with the run's\n"
"                       timing (a block there once the run had stored it)\n"
"  --simulate           --life without files (no --dir): the stream through\n"
"                       an exact LRU, S3-FIFO and SLRU at budgets of 1/2 and\n"
"                       1/4 of the blocks it stores, without and with --scan;\n"
"                       hit rates, each policy's to LRU's, medians over\n"
"                       --seeds (default --requests 100000)\n"
"  --seeds N            --simulate: seeds played from --seed on (default 3)\n"
"  --budgets LIST       --simulate: comma list of n, each a budget of 1/n of\n"
"                       the blocks stored (default 2,4)\n"
"  --s3fifo-small PCT   --simulate: S3-FIFO's small FIFO share (default 10)\n"
"  --s3fifo-promote N   --simulate: loads in the small FIFO that move a block\n"
"                       to main, 1-3 (default 1)\n"
"  --slru-protected PCT --simulate: SLRU's protected share (default 80)\n"
"  --version            print the version\n"
"  --help               this text\n"
"\n"
"Output, one line per phase:\n"
"  <phase>: ops=N bytes=N secs=S GB/s=R ops/s=R p50_us=L p99_us=L max_us=L\n"
"           errors=N [skipped=N] [cpu_s=S]\n"
"--life prints a progress line every --interval seconds and a summary:\n"
"  progress: t=S requests=N req/s=R store_GB/s=R load_GB/s=R\n"
"           lookup_p50_us=L lookup_p99_us=L stored=N loaded=N errors=N\n"
"           wrong=N rss_MiB=R fds=N\n"
"  life: secs=S requests=N req/s=R lookups=N hits=N stored=N skipped=N\n"
"           loaded=N store_GB/s=R load_GB/s=R lookup_p50_us=L\n"
"           lookup_p99_us=L lookup_max_us=L errors=N wrong=N max_rss_MiB=R\n"
"           max_fds=N evicted=N [cpu_s=S] asked=N hit_rate=R unbounded_hit=R\n"
"           unbounded_timed_hit=R [lru_blocks=N lru_hit=R lru_ratio=R\n"
"           lru_timed_hit=R lru_timed_ratio=R] req_p50_us=L req_p99_us=L\n"
"           req_max_us=L load_p99_us=L store_p99_us=L store_errors=N\n"
"           store_enospc=N store_errno=E:N,...\n"
"           load_gone=N statfs_samples=N statfs_over=N statfs_size_MiB=R\n"
"           statfs_max_used_MiB=R statfs_max_over_MiB=R usage_from=SOURCE\n"
"--simulate prints a line per scan, budget and seed, then the medians:\n"
"  simulate: scan=P% budget=1/N seed=N requests=N asked=N stored_blocks=N\n"
"           budget_blocks=N unbounded_hit=R lru_hit=R s3fifo_hit=R\n"
"           s3fifo_ratio=R slru_hit=R slru_ratio=R\n"
"  simulate-median: scan=P% budget=1/N seeds=N lru_hit=R (lru MIN-lru MAX)\n"
"           s3fifo_hit=R (...) s3fifo_ratio=R (...) slru_hit=R (...)\n"
"           slru_ratio=R (...)\n"
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
	uint64_t contents;  /* 0: every block its own bytes */
	unsigned threads, lookup_threads, repeat_load, lookup_after;
	pid_t cpu_of;       /* 0: none */
	int odirect, check, drop_caches, quiet, fsync;
	int run[PH_COUNT];
	int life, blocks_given, life_only;     /* life_only: an option of --life seen */
	int simulate, sim_only, scan_given;    /* sim_only: an option of --simulate seen */
	struct life_opts lo;
} O = {
	.model = "kvbench",
	.block_size = 2u << 20,
	.blocks = 512,
	.threads = 16,
	.lookup_threads = 1,
	.repeat_load = 1,
	.odirect = 1,
	.lo = { .families = 64, .zipf = 1.0, .seed = 1, .interval = 5, .seeds = 3,
		.budgets = { 2, 4 }, .n_budgets = 2 },
};


/* One run of one phase. */
struct run {
	enum phase phase;
	const char *label;
	atomic_uint_fast64_t next;      /* next block index to take */
	struct bio_tally tally;
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

/* ------------------------------------------------------------------ */
/* phases                                                             */

static int ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec ||
	       (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void op_lookup(struct worker *w, const char *path, int want_hit)
{
	if (access(path, F_OK) == 0) {
		if (!want_hit)
			bio_fail(&w->run->tally, path,
				 "access: exists, but was never stored");
	} else if (want_hit || errno != ENOENT) {
		bio_fail(&w->run->tally, path, "access: %s", strerror(errno));
	}
}

/* The key whose bytes block @key holds (--contents). */
static uint64_t content_key(uint64_t key)
{
	return O.contents ? O.key_base + (key - O.key_base) % O.contents : key;
}

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
		bio_block_path(path, sizeof(path),
			   r->phase == PH_LOOKUP_MISS ? key | MISS_BIT : key);
		if (r->phase == PH_STORE) {
			snprintf(tmp, sizeof(tmp), "%s_%" PRIu64 ".tmp", path,
				 w->tmp_suffix);
			bio_fill_block(w->buf, content_key(key));
		}
		clock_gettime(CLOCK_MONOTONIC, &t0);
		switch (r->phase) {
		case PH_STORE:
			bio_store(&r->tally, w->buf, path, tmp);
			break;
		case PH_LOOKUP:
		case PH_LOOKUP_MISS:
			op_lookup(w, path, r->phase == PH_LOOKUP);
			break;
		case PH_LOAD:
			loaded = bio_load(&r->tally, w->buf, path);
			break;
		case PH_COUNT:
			break;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		r->lat_ns[i] = bio_ns_since(&t0, &t1);
		if (loaded && O.check) {
			long long bad = bio_check_block(w->buf, content_key(key));

			if (bad >= 0)
				bio_fail(&r->tally, path, "content differs from block key %"
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
		bio_fatal("--drop-caches: writing /proc/sys/vm/drop_caches: %s",
		      strerror(errno));
	close(fd);
}

/* Runs one phase and prints its line; returns its error count. */
static uint64_t run_phase(enum phase ph, const char *label)
{
	unsigned nthreads = ph == PH_LOOKUP || ph == PH_LOOKUP_MISS ?
			    O.lookup_threads : O.threads;
	struct worker *w = calloc(nthreads, sizeof(*w));
	struct run r = { .phase = ph, .label = label, .tally.label = label };
	struct timespec t0 = { 0 }, t1 = { 0 };
	uint64_t errors, ops = O.blocks;
	double secs, cpu0 = -1, cpu1 = -1;
	unsigned t;
	int e;

	r.lat_ns = calloc(O.blocks, sizeof(*r.lat_ns));
	if (!w || !r.lat_ns)
		bio_fatal("out of memory");
	pthread_barrier_init(&r.start, NULL, nthreads + 1);
	if (ph == PH_STORE && O.odirect)
		bio_odirect_probe();
	for (t = 0; t < nthreads; t++) {
		w[t].run = &r;
		if (ph == PH_STORE) {
			w[t].buf = bio_block_buffer();
			w[t].tmp_suffix = bio_tmp_suffix();
		} else if (ph == PH_LOAD) {
			w[t].buf = bio_alloc_aligned(O.block_size);
		}
		e = pthread_create(&w[t].tid, NULL, worker_main, &w[t]);
		if (e)
			bio_fatal("pthread_create: %s", strerror(e));
	}
	if (O.cpu_of)
		cpu0 = bio_cpu_secs(O.cpu_of);
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
	if (O.cpu_of)
		cpu1 = bio_cpu_secs(O.cpu_of);
	secs = (double)bio_ns_since(&t0, &t1) / 1e9;
	qsort(r.lat_ns, ops, sizeof(*r.lat_ns), cmp_u64);
	errors = atomic_load(&r.tally.errors);

	printf("%s: ops=%" PRIu64 " bytes=%" PRIu64 " secs=%.3f GB/s=%.3f "
	       "ops/s=%.1f p50_us=%.1f p99_us=%.1f max_us=%.1f errors=%" PRIu64,
	       label, ops, (uint64_t)atomic_load(&r.tally.bytes), secs,
	       secs > 0 ? (double)atomic_load(&r.tally.bytes) / secs / 1e9 : 0,
	       secs > 0 ? (double)ops / secs : 0,
	       pct_us(r.lat_ns, ops, 50), pct_us(r.lat_ns, ops, 99),
	       pct_us(r.lat_ns, ops, 100), errors);
	if (ph == PH_STORE)
		printf(" skipped=%" PRIu64, (uint64_t)atomic_load(&r.tally.skipped));
	if (O.cpu_of && (cpu0 < 0 || cpu1 < 0))
		bio_fatal("--cpu-of %d: cannot read its CPU clock (gone?)", (int)O.cpu_of);
	if (O.cpu_of)
		printf(" cpu_s=%.3f", cpu1 - cpu0);
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

/* A decimal number from lo to hi. */
static double parse_double(const char *opt, const char *s, double lo, double hi)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (!*s || *end || errno || !(v >= lo && v <= hi))
		usage_error("%s: '%s' is not a number from %g to %g", opt, s, lo, hi);
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

static void parse_budgets(const char *list)
{
	char buf[256], *save, *tok;

	O.lo.n_budgets = 0;
	if (snprintf(buf, sizeof(buf), "%s", list) >= (int)sizeof(buf))
		usage_error("--budgets: list too long");
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (O.lo.n_budgets == LIFE_MAX_BUDGETS)
			usage_error("--budgets: at most %d", LIFE_MAX_BUDGETS);
		O.lo.budgets[O.lo.n_budgets++] =
			(unsigned)parse_u64("--budgets", tok, 1, 1000000);
	}
	if (!O.lo.n_budgets)
		usage_error("--budgets: no budget given");
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
		} else if (FLAG("--version") || FLAG("-V")) {
			printf("kvtierfs-bench %s\n", PACKAGE_VERSION);
			exit(0);
		} else if (ARG("--dir")) {
			O.dir = val;
		} else if (ARG("--block-size")) {
			O.block_size = parse_size(a, val);
		} else if (ARG("--blocks")) {
			O.blocks = parse_u64(a, val, 1, 1ULL << 40);
			O.blocks_given = 1;
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
		} else if (ARG("--cpu-of")) {
			O.cpu_of = (pid_t)parse_u64(a, val, 1, INT32_MAX);
			if (bio_cpu_secs(O.cpu_of) < 0)
				usage_error("--cpu-of: no process %s", val);
		} else if (ARG("--repeat-load")) {
			O.repeat_load = (unsigned)parse_u64(a, val, 1, 1000);
		} else if (ARG("--key-base")) {
			O.key_base = parse_u64(a, val, 0, 1ULL << 62);
		} else if (ARG("--contents")) {
			O.contents = parse_u64(a, val, 1, 1ULL << 62);
		} else if (ARG("--model")) {
			O.model = val;
		} else if (FLAG("--quiet")) {
			O.quiet = 1;
		} else if (FLAG("--fsync")) {
			O.fsync = 1;
		} else if (FLAG("--life")) {
			O.life = 1;
		} else if (ARG("--duration")) {
			O.lo.duration = parse_double(a, val, 0.1, 1e7);
			O.life_only = 1;
		} else if (ARG("--families")) {
			O.lo.families = (unsigned)parse_u64(a, val, 1, 1000000);
			O.life_only = 1;
		} else if (ARG("--zipf")) {
			O.lo.zipf = parse_double(a, val, 0, 10);
			O.life_only = 1;
		} else if (ARG("--capacity")) {
			O.lo.capacity = parse_u64(a, val, 1, UINT64_MAX);
			O.life_only = 1;
		} else if (ARG("--seed")) {
			O.lo.seed = parse_u64(a, val, 0, UINT64_MAX);
			O.life_only = 1;
		} else if (ARG("--interval")) {
			O.lo.interval = parse_double(a, val, 0.1, 86400);
			O.life_only = 1;
		} else if (ARG("--pid")) {
			O.lo.pid = (int)parse_u64(a, val, 1, INT32_MAX);
			O.life_only = 1;
		} else if (FLAG("--json")) {
			O.lo.json = 1;
			O.life_only = 1;
		} else if (ARG("--requests")) {
			O.lo.requests = parse_u64(a, val, 1, 1ULL << 40);
			O.life_only = 1;
		} else if (ARG("--lru-blocks")) {
			O.lo.lru_blocks = parse_u64(a, val, 1, 1ULL << 40);
			O.life_only = 1;
		} else if (ARG("--scan")) {
			O.lo.scan_pct = (unsigned)parse_u64(a, val, 0, 100);
			O.scan_given = 1;
			O.life_only = 1;
		} else if (FLAG("--simulate")) {
			O.simulate = 1;
			O.life = 1;
		} else if (ARG("--seeds")) {
			O.lo.seeds = (unsigned)parse_u64(a, val, 1, 1000);
			O.sim_only = 1;
		} else if (ARG("--budgets")) {
			parse_budgets(val);
			O.sim_only = 1;
		} else if (ARG("--s3fifo-small")) {
			O.lo.tuning.small_pct = (unsigned)parse_u64(a, val, 1, 90);
			O.sim_only = 1;
		} else if (ARG("--slru-protected")) {
			O.lo.tuning.protected_pct = (unsigned)parse_u64(a, val, 1, 99);
			O.sim_only = 1;
		} else if (ARG("--s3fifo-promote")) {
			O.lo.tuning.promote_loads = (unsigned)parse_u64(a, val, 1, 3);
			O.sim_only = 1;
		} else {
			usage_error("unknown argument '%s'", argv[i]);
		}
#undef FLAG
#undef ARG
	}
	if (O.sim_only && !O.simulate)
		usage_error("--seeds, --budgets, --s3fifo-small, --s3fifo-promote "
			    "and --slru-protected belong to --simulate");
	if (O.simulate) {
		if (O.dir || O.lo.duration || O.lo.capacity || O.lo.pid || O.lo.lru_blocks)
			usage_error("--simulate uses no files, no time and no "
				    "process: no --dir, --duration, --capacity, --pid "
				    "or --lru-blocks");
		O.lo.blocks = O.blocks_given ? O.blocks : 0;
		if (!O.blocks_given && !O.lo.requests)
			O.lo.requests = 100000;
		if (!O.scan_given)
			O.lo.scan_pct = 20;
		O.lo.block_size = O.block_size;
		return;
	}
	if (!O.dir)
		usage_error("--dir DIR is required");
	if (O.life_only && !O.life)
		usage_error("--duration, --capacity, --families, --zipf, --seed, "
			    "--interval, --pid, --json, --requests, --scan and "
			    "--lru-blocks belong to --life");
	if (O.life) {
		O.lo.blocks = O.blocks_given ? O.blocks : 0;
		if (!O.blocks_given && !O.lo.requests && !O.lo.duration)
			O.lo.duration = 60;
		O.lo.threads = O.threads;
		/* room for every block a request may have queued, pinned */
		if (O.lo.capacity && O.lo.capacity < 64ULL * O.threads)
			usage_error("--capacity: at least 64 blocks a thread (%llu)",
				    64ULL * O.threads);
	}
	if (!O.life && O.blocks > 1ULL << 32)
		usage_error("--blocks: at most %llu without --life", 1ULL << 32);
	if (O.lo.pid && kill(O.lo.pid, 0) < 0 && errno == ESRCH)
		usage_error("--pid %d: no such process", O.lo.pid);
	if (stat(O.dir, &st) < 0)
		usage_error("--dir %s: %s", O.dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		usage_error("--dir %s: not a directory", O.dir);
	if (O.odirect && O.block_size % BIO_PAGE)
		usage_error("--block-size %zu: O_DIRECT needs a multiple of %d "
			    "(or use --buffered)", O.block_size, BIO_PAGE);
	if (!*O.model || strchr(O.model, '/'))
		usage_error("--model: a name without '/' is needed");
	if (O.drop_caches && access("/proc/sys/vm/drop_caches", W_OK) < 0)
		usage_error("--drop-caches: cannot write "
			    "/proc/sys/vm/drop_caches: %s (needs root)",
			    strerror(errno));
	if (bio_setup(O.dir, O.model, O.block_size, O.odirect, O.fsync) < 0)
		usage_error("--dir and --model: path too long");
}

int main(int argc, char **argv)
{
	uint64_t errors = 0;

	parse_args(argc, argv);
	if (O.simulate) {
		life_simulate(&O.lo);
		return 0;
	}
	if (O.life) {
		if (!O.quiet && !O.lo.json)
			printf("# kvtierfs-bench --life dir=%s block-size=%zu "
			       "blocks=%" PRIu64 " duration=%g threads=%u io=%s "
			       "families=%u zipf=%g seed=%" PRIu64 "\n", O.dir,
			       O.block_size, O.lo.blocks, O.lo.duration, O.threads,
			       O.odirect ? "direct" : "buffered", O.lo.families,
			       O.lo.zipf, O.lo.seed);
		errors = life_run(&O.lo);
		bio_cleanup();
		return errors ? 1 : 0;
	}
	if (!O.quiet)
		printf("# kvtierfs-bench dir=%s block-size=%zu blocks=%" PRIu64
		       " threads=%u lookup-threads=%u io=%s check=%s "
		       "key-base=%" PRIu64 "\n", O.dir, O.block_size, O.blocks,
		       O.threads, O.lookup_threads,
		       O.odirect ? "direct" : "buffered",
		       O.check ? "yes" : "no", O.key_base);
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
	bio_cleanup();
	return errors ? 1 : 0;
}
