/*
 * kvtierfs-bench --life: plays a server's stream of requests against a
 * directory, and reports what it met (hits, loads, stores, latencies,
 * progress every interval): a server's requests, not a benchmark's
 * phases.
 *
 * Prompts come in families (a system prompt, few-shot examples) whose
 * popularity follows a zipf law.  A request is its family's prefix, or
 * half the time the family's last conversation, followed by a few blocks
 * of its own.  Block keys are a chain, each the mix of the one before and
 * its tokens, as vLLM hashes a token prefix: shared prefixes share names.
 *
 * For each request one thread (vLLM's lookup thread) calls access() on the
 * blocks in order until the first miss; the hits go to a pool of loaders
 * (every byte checked), the rest to a pool of storers (tmp + rename),
 * unless a store of that block is already on its way.  Requests run ahead
 * of their loads and stores by a bounded number of blocks, as a server's
 * scheduler does.  With --capacity the stream keeps that many blocks and
 * unlinks the least recently used past it, as a server's evictor keeps
 * its tier's size.
 *
 * With --scan, that share of the requests are long documents read once:
 * blocks of their own, never asked for again, the one-off scan that must
 * not flush a cache's shared prefixes.
 *
 * A request's latency, from its first lookup to its last load or store
 * done, is the bench's stand-in for a server's time to first token.  A
 * thread samples statfs of the directory ten times a second through the
 * run: a sample counts as over when the bytes used pass the file
 * system's size (a kvtierfs mount's budget) plus the bytes of this run's
 * stores under way at that moment.  A kvtierfs mount's statfs never shows
 * more used than its size, so on its root the usage it states in its
 * attribute user.kvtierfs.mount is taken when it is larger.  With
 * --lru-blocks the stream the run played is played again through an
 * exact LRU of that many blocks (as --simulate does), whose hit rate the
 * run's is measured against.
 *
 * --simulate plays the same stream (the same next_request, the same seed)
 * with no file system at all, through the store's eviction policies
 * (src/store/evict.c) at budgets below what the stream stores, and counts
 * their hits: how each would serve the requests.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "life.h"
#include "benchio.h"
#include <dirent.h>
#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define MAX_CHAIN 128          /* blocks of one request at most */
#define PREFIX_MIN 2           /* blocks of a family's prefix */
#define PREFIX_MAX 32
#define SUFFIX_MIN 1           /* blocks of a request's own part */
#define SUFFIX_MAX 8
#define CONTINUE_PCT 50        /* requests that continue a conversation */
#define SCAN_MIN 32            /* blocks of a one-off document (--scan) */
#define SCAN_MAX 96
#define INFLIGHT_PER_THREAD 4  /* blocks queued or running per worker */
#define HSUB 16                /* histogram buckets per power of two */
#define HBUCKETS (64 * HSUB)
#define SAMPLE_US 100000       /* statfs every 0.1 s */
#define ERRNO_KINDS 256        /* store errors counted by errno below this */
#define MOUNT_XATTR "user.kvtierfs.mount"

/* Log-linear histogram of nanoseconds: 6% resolution, fixed size. */
struct hist {
	uint64_t n, max;
	uint64_t c[HBUCKETS];
};

struct family {
	unsigned prefix_len, conv_len;
	bool prefix_used;              /* its prefix blocks are not new */
	uint64_t conv[MAX_CHAIN];      /* the last request's chain */
};

/* One progress line's figures. */
struct sample {
	double t, req_s, store_gbs, load_gbs, p50_us, p99_us, rss_mib;
	uint64_t requests, stored, loaded, errors, wrong;
	long fds;
};

/* What one worker thread keeps between jobs. */
struct tls {
	unsigned char *load_buf, *store_buf;
	uint64_t tmp_suffix;
};

static const struct life_opts *L;
static struct bio_tally t_lookup = { .label = "life lookup" };
static struct bio_tally t_load = { .label = "life load" };
static struct bio_tally t_store = { .label = "life store" };
static atomic_uint_fast64_t g_inflight;
static GMutex g_lock;
static GCond g_drained;         /* a job finished */
static struct hist g_request_ns;        /* requests' latencies, under g_lock */
static struct hist g_load_ns, g_store_ns; /* each load's and store's, under g_lock */
/* Keys queued or being stored (under g_lock): a server stores a block
 * once, not again while its first store is on its way. */
static GHashTable *g_pending;
/* --capacity: the blocks kept, least recently used first, under g_lock.  A
 * block a request found is pinned until its load is done, and is never
 * the one evicted, so that no load meets its own block's eviction. */
struct kept {
	uint64_t key;
	unsigned pins;
	GList link;
};
static GQueue g_lru = G_QUEUE_INIT;
static GHashTable *g_kept;
static struct bio_tally t_evict = { .label = "life evict" };
static atomic_uint_fast64_t g_evicted;
/* Stores under way, from their first call to their rename's return: the
 * bytes a file system may hold beyond its size at that moment. */
static atomic_uint_fast64_t g_storing;
/* Failed stores by errno (the last one ERRNO_KINDS and above), and loads
 * of blocks gone since their lookup found them (ENOENT at the open). */
static atomic_uint_fast64_t g_store_errno[ERRNO_KINDS + 1];
static atomic_uint_fast64_t g_load_gone;

/* One request: its jobs not yet done and its own reference (under
 * g_lock); the last one out records its latency. */
struct request {
	struct timespec t0;
	uint64_t no;            /* its place in the stream */
	unsigned left;
};

/* For the LRU replayed with the run's timing (--lru-blocks), under
 * g_lock: each request's first lookup and its end, and when each of its
 * stores was done, by the mix of request and key. */
static GArray *g_req_t0, *g_req_t1;     /* gint64 us, by request: its
					 * lookups' end, its end */
static GHashTable *g_stored_at;         /* mix -> gint64 us */

/* A load or a store of a request.  The key is first: the pending set
 * hashes a store's job as an int64. */
struct job {
	uint64_t key;
	bool pinned;            /* a load of a block --capacity pinned */
	struct request *req;
};

static void tls_free(gpointer p)
{
	struct tls *t = p;

	free(t->load_buf);
	free(t->store_buf);
	g_free(t);
}

static GPrivate g_tls = G_PRIVATE_INIT(tls_free);

/* This thread's buffers; a loader needs one to read into, a storer one
 * holding the pattern. */
static struct tls *tls_get(bool storer)
{
	struct tls *t = g_private_get(&g_tls);

	if (!t) {
		t = g_new0(struct tls, 1);
		if (storer)
			t->store_buf = bio_block_buffer();
		else
			t->load_buf = bio_alloc_aligned(BIO.block_size);
		t->tmp_suffix = bio_tmp_suffix();
		g_private_set(&g_tls, t);
	}
	return t;
}

/* ------------------------------------------------------------------ */
/* histograms                                                         */

static unsigned hist_index(uint64_t v)
{
	unsigned e;

	if (v < HSUB)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);
	return (e - 3) * HSUB + (unsigned)((v >> (e - 4)) & (HSUB - 1));
}

/* The middle of bucket i. */
static uint64_t hist_value(unsigned i)
{
	unsigned e = i / HSUB + 3;

	if (i < HSUB)
		return i;
	return ((uint64_t)(HSUB + i % HSUB) << (e - 4)) + ((1ULL << (e - 4)) >> 1);
}

static void hist_add(struct hist *h, uint64_t v)
{
	h->c[hist_index(v)]++;
	h->n++;
	if (v > h->max)
		h->max = v;
}

/* Nearest-rank percentile p of h, in microseconds. */
static double hist_pct_us(const struct hist *h, unsigned p)
{
	uint64_t rank = (h->n * p + 99) / 100, seen = 0;

	if (!h->n)
		return 0;
	for (unsigned i = 0; i < HBUCKETS; i++) {
		seen += h->c[i];
		if (seen >= (rank ? rank : 1))
			return (double)MIN(hist_value(i), h->max) / 1e3;
	}
	return (double)h->max / 1e3;
}

/* ------------------------------------------------------------------ */
/* the daemon's resources                                             */

static double proc_rss_mib(int pid)
{
	char path[64], line[256];
	double mib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long kb;

		if (sscanf(line, "VmRSS: %lu kB", &kb) == 1) {
			mib = (double)kb / 1024;
			break;
		}
	}
	fclose(f);
	return mib;
}

static long proc_fds(int pid)
{
	char path[64];
	struct dirent *d;
	long n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((d = readdir(dir)))
		if (d->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

/* ------------------------------------------------------------------ */
/* the workers                                                        */

/* Under g_lock: one of @r's references is done. */
static void request_put(struct request *r)
{
	struct timespec t1;

	if (--r->left)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	hist_add(&g_request_ns, bio_ns_since(&r->t0, &t1));
	g_array_index(g_req_t1, gint64, r->no) = g_get_monotonic_time();
	g_free(r);
}

/* @j is done, begun at @t0; a store's job is freed by the pending set. */
static void job_done(struct job *j, bool store, const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	g_mutex_lock(&g_lock);
	hist_add(store ? &g_store_ns : &g_load_ns, bio_ns_since(t0, &t1));
	request_put(j->req);
	if (store)
		g_hash_table_remove(g_pending, &j->key);
	else
		g_free(j);
	atomic_fetch_sub(&g_inflight, 1);
	g_cond_signal(&g_drained);
	g_mutex_unlock(&g_lock);
}

/* Pins @key if it is kept (a use: it goes to the end of the queue). */
static bool kept_pin(uint64_t key)
{
	struct kept *k;

	g_mutex_lock(&g_lock);
	k = g_hash_table_lookup(g_kept, &key);
	if (k) {
		k->pins++;
		g_queue_unlink(&g_lru, &k->link);
		g_queue_push_tail_link(&g_lru, &k->link);
	}
	g_mutex_unlock(&g_lock);
	return k != NULL;
}

static void kept_unpin(uint64_t key)
{
	struct kept *k;

	g_mutex_lock(&g_lock);
	k = g_hash_table_lookup(g_kept, &key);
	g_assert(k && k->pins);
	k->pins--;
	g_mutex_unlock(&g_lock);
}

/* A store of @key is done (@stored, or skipped as already there): keep
 * it, and unlink the least recently used unpinned blocks past --capacity.
 * The unlinks happen under the lock, so that no request finds a block
 * kept that is on its way out; and a skipped store may have seen a block
 * this stream evicted since, so that one is kept only if it is there. */
static void keep(uint64_t key, bool stored)
{
	char path[PATH_MAX];
	struct kept *k;

	bio_block_path(path, sizeof(path), key);
	g_mutex_lock(&g_lock);
	if (!g_hash_table_contains(g_kept, &key) && (stored || access(path, F_OK) == 0)) {
		k = g_new0(struct kept, 1);
		k->key = key;
		k->link.data = k;
		g_hash_table_insert(g_kept, &k->key, k);
		g_queue_push_tail_link(&g_lru, &k->link);
	}
	for (guint turns = g_lru.length; g_hash_table_size(g_kept) > L->capacity && turns;
	     turns--) {
		k = g_lru.head->data;
		g_queue_unlink(&g_lru, &k->link);
		if (k->pins) {
			g_queue_push_tail_link(&g_lru, &k->link);
			continue;
		}
		bio_block_path(path, sizeof(path), k->key);
		if (unlink(path) < 0)
			bio_fail(&t_evict, path, "unlink: %s", strerror(errno));
		else
			atomic_fetch_add(&g_evicted, 1);
		g_hash_table_remove(g_kept, &k->key);
	}
	g_mutex_unlock(&g_lock);
}

static void load_job(gpointer data, gpointer user)
{
	struct job *j = data;
	char path[PATH_MAX];
	struct timespec t0;

	(void)user;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	bio_block_path(path, sizeof(path), j->key);
	errno = 0;
	if (!bio_load_checked(&t_load, tls_get(false)->load_buf, path, j->key) &&
	    errno == ENOENT)
		atomic_fetch_add(&g_load_gone, 1);
	if (j->pinned)
		kept_unpin(j->key);
	job_done(j, false, &t0);
}

/* The key of request @no's store of @key in g_stored_at. */
static gpointer stored_mix(uint64_t no, uint64_t key)
{
	return g_memdup2(&(uint64_t){ bio_mix64(key ^ bio_mix64(no + 1)) }, sizeof(uint64_t));
}

static void store_job(gpointer data, gpointer user)
{
	struct job *j = data;
	struct tls *t = tls_get(true);
	char path[PATH_MAX], tmp[PATH_MAX + 32];
	struct timespec t0;
	int stored, e;

	(void)user;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	bio_block_path(path, sizeof(path), j->key);
	snprintf(tmp, sizeof(tmp), "%s_%" PRIu64 ".tmp", path, t->tmp_suffix);
	bio_fill_block(t->store_buf, j->key);
	atomic_fetch_add(&g_storing, 1);
	errno = 0;
	stored = bio_store(&t_store, t->store_buf, path, tmp);
	/* bio_store undoes a failed store with close and unlink, which
	 * leave errno alone when they succeed */
	e = errno;
	atomic_fetch_sub(&g_storing, 1);
	if (stored < 0)
		atomic_fetch_add(&g_store_errno[MIN((unsigned)MAX(e, 0), ERRNO_KINDS)], 1);
	if (stored >= 0 && L->capacity)
		keep(j->key, stored == 1);
	if (stored >= 0) {
		gint64 done = g_get_monotonic_time();

		g_mutex_lock(&g_lock);
		g_hash_table_insert(g_stored_at, stored_mix(j->req->no, j->key),
				    g_memdup2(&done, sizeof(done)));
		g_mutex_unlock(&g_lock);
	}
	job_done(j, true, &t0);
}

/* ------------------------------------------------------------------ */
/* the statfs sampler                                                 */

struct sampler {
	GThread *thread;
	GMutex lock;
	GCond wake;
	bool stop;
	/* the thread's alone until it is joined */
	uint64_t samples, over, failed, size, max_used, max_over;  /* max_used: under size */
	bool from_mount;        /* a sample took the mount's own usage */
};

/* The usage a kvtierfs mount states on its root (its attribute): false
 * elsewhere, or with no budget. */
static bool mount_usage(uint64_t *used)
{
	char buf[4096], *p;
	ssize_t n = getxattr(BIO.dir, MOUNT_XATTR, buf, sizeof(buf) - 1);

	if (n <= 0)
		return false;
	buf[n] = '\0';
	for (p = buf; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (sscanf(p, "usage %" SCNu64, used) == 1)
			return true;
	return false;
}

static void sample_once(struct sampler *sm)
{
	uint64_t before = atomic_load(&g_storing), after, used, size, mount, allowed;
	struct statvfs sv;

	if (statvfs(BIO.dir, &sv) < 0) {
		sm->failed++;
		return;
	}
	size = (uint64_t)sv.f_blocks * sv.f_frsize;
	used = (uint64_t)(sv.f_blocks - sv.f_bfree) * sv.f_frsize;
	if (mount_usage(&mount)) {
		sm->from_mount = true;
		used = MAX(used, mount);
	}
	after = atomic_load(&g_storing);
	/* a store under way at either end may have been under way when the
	 * figures were taken */
	allowed = size + MAX(before, after) * BIO.block_size;
	sm->samples++;
	/* A mount shows its budget as its size once it has counted its
	 * usage; before, the lower file system's: the largest usage is the
	 * one under the last size */
	if (size != sm->size)
		sm->max_used = 0;
	sm->size = size;
	sm->max_used = MAX(sm->max_used, used);
	if (used > allowed) {
		sm->over++;
		sm->max_over = MAX(sm->max_over, used - allowed);
	}
}

static gpointer sampler_main(gpointer data)
{
	struct sampler *sm = data;
	gint64 next = g_get_monotonic_time();

	g_mutex_lock(&sm->lock);
	while (!sm->stop) {
		g_mutex_unlock(&sm->lock);
		sample_once(sm);
		g_mutex_lock(&sm->lock);
		next += SAMPLE_US;
		while (!sm->stop && g_cond_wait_until(&sm->wake, &sm->lock, next))
			;
	}
	g_mutex_unlock(&sm->lock);
	return NULL;
}

static void sampler_start(struct sampler *sm)
{
	g_mutex_init(&sm->lock);
	g_cond_init(&sm->wake);
	sm->thread = g_thread_new("statfs", sampler_main, sm);
}

static void sampler_stop(struct sampler *sm)
{
	g_mutex_lock(&sm->lock);
	sm->stop = true;
	g_cond_signal(&sm->wake);
	g_mutex_unlock(&sm->lock);
	g_thread_join(sm->thread);
	g_cond_clear(&sm->wake);
	g_mutex_clear(&sm->lock);
}

/* ------------------------------------------------------------------ */
/* the stream                                                         */

struct life {
	GRand *rand;
	double *zipf_cdf;
	struct family *fam;
	GThreadPool *loads, *stores;
	uint64_t requests, new_blocks, hits;     /* new_blocks: distinct keys made */
	uint64_t asked;                         /* blocks of the requests */
	struct hist lookup, lookup_iv;  /* whole run, this interval */
	gint64 t0, next_report;
	struct sample last;
	GArray *series;
	double max_rss;
	long max_fds;
	double cpu0, cpu;              /* the daemon's CPU seconds: at the start, in the run */
	struct sampler sm;
	double unbounded_hit, lru_hit;  /* the stream through an exact LRU */
	double unbounded_timed_hit, lru_timed_hit; /* the same, with the run's timing */
};

static uint64_t chain_next(uint64_t prev, uint64_t token)
{
	return bio_mix64(prev * 0x9e3779b97f4a7c15ULL ^ bio_mix64(token));
}

static unsigned pick_family(struct life *s)
{
	double u = g_rand_double(s->rand);
	unsigned lo = 0, hi = L->families - 1;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;

		if (s->zipf_cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The keys of the next request, into chain; returns their number. */
static unsigned next_request(struct life *s, uint64_t *chain)
{
	unsigned f = pick_family(s);
	struct family *fm = &s->fam[f];
	unsigned own = (unsigned)g_rand_int_range(s->rand, SUFFIX_MIN, SUFFIX_MAX + 1);
	unsigned n = 0;

	if (L->scan_pct && g_rand_int_range(s->rand, 0, 100) < (gint32)L->scan_pct) {
		/* keys of its own: a root no other request has */
		uint64_t k = bio_mix64(~L->seed ^ bio_mix64(s->requests));

		n = (unsigned)g_rand_int_range(s->rand, SCAN_MIN, SCAN_MAX + 1);
		for (unsigned i = 0; i < n; i++)
			chain[i] = k = chain_next(k, i);
		s->new_blocks += n;
		return n;
	}
	if (fm->conv_len && fm->conv_len + own <= MAX_CHAIN &&
	    g_rand_int_range(s->rand, 0, 100) < CONTINUE_PCT) {
		n = fm->conv_len;
		memcpy(chain, fm->conv, n * sizeof(*chain));
	} else {
		uint64_t k = bio_mix64(L->seed ^ ((uint64_t)f << 32));

		for (; n < fm->prefix_len; n++)
			chain[n] = k = chain_next(k, ((uint64_t)f << 32) | n);
		if (!fm->prefix_used)
			s->new_blocks += fm->prefix_len;
		fm->prefix_used = true;
	}
	s->new_blocks += own;
	for (unsigned i = 0; i < own; i++, n++)
		chain[n] = chain_next(chain[n - 1],
				      bio_mix64(L->seed + s->requests) + i);
	fm->conv_len = n;
	memcpy(fm->conv, chain, n * sizeof(*chain));
	return n;
}

/* Wrong bytes are counted as load errors too. */
static uint64_t all_errors(void)
{
	return atomic_load(&t_lookup.errors) + atomic_load(&t_load.errors) +
	       atomic_load(&t_store.errors) + atomic_load(&t_evict.errors);
}

static double secs_since(gint64 t0)
{
	return (double)(g_get_monotonic_time() - t0) / 1e6;
}

static void report(struct life *s)
{
	struct sample x = { .t = secs_since(s->t0) };
	double dt;

	x.requests = s->requests;
	x.stored = atomic_load(&t_store.bytes) / BIO.block_size;
	x.loaded = atomic_load(&t_load.bytes) / BIO.block_size;
	x.errors = all_errors();
	x.wrong = atomic_load(&t_load.wrong);
	x.p50_us = hist_pct_us(&s->lookup_iv, 50);
	x.p99_us = hist_pct_us(&s->lookup_iv, 99);
	x.rss_mib = L->pid ? proc_rss_mib(L->pid) : -1;
	x.fds = L->pid ? proc_fds(L->pid) : -1;
	dt = x.t - s->last.t;
	if (dt > 0) {
		x.req_s = (double)(x.requests - s->last.requests) / dt;
		x.store_gbs = (double)(x.stored - s->last.stored) *
			      (double)BIO.block_size / dt / 1e9;
		x.load_gbs = (double)(x.loaded - s->last.loaded) *
			     (double)BIO.block_size / dt / 1e9;
	}
	s->max_rss = MAX(s->max_rss, x.rss_mib);
	s->max_fds = MAX(s->max_fds, x.fds);
	memset(&s->lookup_iv, 0, sizeof(s->lookup_iv));
	s->last = x;
	g_array_append_val(s->series, x);
	if (!L->json) {
		printf("progress: t=%.1f requests=%" PRIu64 " req/s=%.1f "
		       "store_GB/s=%.3f load_GB/s=%.3f lookup_p50_us=%.1f "
		       "lookup_p99_us=%.1f stored=%" PRIu64 " loaded=%" PRIu64
		       " errors=%" PRIu64 " wrong=%" PRIu64 " rss_MiB=%.1f "
		       "fds=%ld\n", x.t, x.requests, x.req_s, x.store_gbs,
		       x.load_gbs, x.p50_us, x.p99_us, x.stored, x.loaded,
		       x.errors, x.wrong, x.rss_mib, x.fds);
		fflush(stdout);
	}
	s->next_report = g_get_monotonic_time() + (gint64)(L->interval * 1e6);
}

/* Waits until fewer than limit blocks are queued or running; reports on
 * time while it waits. */
static void wait_room(struct life *s, uint64_t limit)
{
	g_mutex_lock(&g_lock);
	while (atomic_load(&g_inflight) >= limit) {
		if (!g_cond_wait_until(&g_drained, &g_lock, s->next_report)) {
			g_mutex_unlock(&g_lock);
			report(s);
			g_mutex_lock(&g_lock);
		}
	}
	g_mutex_unlock(&g_lock);
}

/* Queues a load (of a block @pinned or not), or a store unless one of
 * that key is on its way. */
static void push(struct life *s, GThreadPool *pool, uint64_t key, bool pinned,
		 struct request *r)
{
	struct job *job = g_new(struct job, 1);
	GError *err = NULL;

	job->key = key;
	job->pinned = pinned;
	job->req = r;
	wait_room(s, (uint64_t)L->threads * 2 * INFLIGHT_PER_THREAD);
	g_mutex_lock(&g_lock);
	if (pool == s->stores) {
		if (g_hash_table_contains(g_pending, &job->key)) {
			g_mutex_unlock(&g_lock);
			g_free(job);
			return;
		}
		g_hash_table_add(g_pending, &job->key);
	}
	r->left++;
	atomic_fetch_add(&g_inflight, 1);
	g_mutex_unlock(&g_lock);
	if (!g_thread_pool_push(pool, job, &err))
		bio_fatal("thread pool: %s", err->message);
}

/* One request: lookups in order until the first miss, then loads of the
 * hits and stores of the rest. */
static void serve(struct life *s)
{
	uint64_t chain[MAX_CHAIN];
	bool pinned[MAX_CHAIN];
	char path[PATH_MAX];
	unsigned n = next_request(s, chain), hits;
	struct request *req = g_new0(struct request, 1);
	gint64 now;

	req->left = 1;
	req->no = s->requests;
	clock_gettime(CLOCK_MONOTONIC, &req->t0);
	for (hits = 0; hits < n; hits++) {
		struct timespec t0, t1;
		int r, e;

		pinned[hits] = L->capacity && kept_pin(chain[hits]);
		bio_block_path(path, sizeof(path), chain[hits]);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		r = access(path, F_OK);
		e = errno;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		hist_add(&s->lookup, bio_ns_since(&t0, &t1));
		hist_add(&s->lookup_iv, bio_ns_since(&t0, &t1));
		if (r < 0) {
			if (e != ENOENT)
				bio_fail(&t_lookup, path, "access: %s", strerror(e));
			if (pinned[hits])
				kept_unpin(chain[hits]);
			break;
		}
	}
	s->hits += hits;
	s->asked += n;
	/* The replay's moment of this request's lookups: their end, so that
	 * it sees every block the run's lookups could have seen. */
	now = g_get_monotonic_time();
	g_mutex_lock(&g_lock);
	g_array_append_val(g_req_t0, now);
	g_array_set_size(g_req_t1, g_req_t0->len);
	g_mutex_unlock(&g_lock);
	for (unsigned i = 0; i < hits; i++)
		push(s, s->loads, chain[i], pinned[i], req);
	for (unsigned i = hits; i < n; i++)
		push(s, s->stores, chain[i], false, req);
	g_mutex_lock(&g_lock);
	request_put(req);
	g_mutex_unlock(&g_lock);
	s->requests++;
}

/* The generator's state, as at the start of a stream of L->seed. */
static void stream_setup(struct life *s)
{
	double sum = 0;
	guint32 seed[2] = { (guint32)L->seed, (guint32)(L->seed >> 32) };

	s->rand = g_rand_new_with_seed_array(seed, 2);
	s->zipf_cdf = g_new(double, L->families);
	s->fam = g_new0(struct family, L->families);
	for (unsigned f = 0; f < L->families; f++) {
		sum += 1.0 / pow(f + 1, L->zipf);
		s->zipf_cdf[f] = sum;
		s->fam[f].prefix_len = (unsigned)g_rand_int_range(s->rand,
					PREFIX_MIN, PREFIX_MAX + 1);
	}
	for (unsigned f = 0; f < L->families; f++)
		s->zipf_cdf[f] /= sum;
}

static void stream_free(struct life *s)
{
	g_free(s->fam);
	g_free(s->zipf_cdf);
	g_rand_free(s->rand);
}

/* Whether the stream has reached --blocks or --requests. */
static bool stream_done(const struct life *s)
{
	return (L->blocks && s->new_blocks >= L->blocks) ||
	       (L->requests && s->requests >= L->requests);
}

static void setup(struct life *s)
{
	GError *err = NULL;

	stream_setup(s);
	s->series = g_array_new(FALSE, TRUE, sizeof(struct sample));
	g_pending = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
	g_kept = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, g_free);
	g_req_t0 = g_array_new(FALSE, TRUE, sizeof(gint64));
	g_req_t1 = g_array_new(FALSE, TRUE, sizeof(gint64));
	g_stored_at = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
	s->loads = g_thread_pool_new(load_job, NULL, (gint)L->threads, TRUE, &err);
	if (s->loads)
		s->stores = g_thread_pool_new(store_job, NULL, (gint)L->threads,
					      TRUE, &err);
	if (!s->stores)
		bio_fatal("thread pool: %s", err->message);
}

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0;
}

static double ratio_of(double a, double b)
{
	return b > 0 ? a / b : 0;
}

/* The failed stores by errno, "ENOSPC:3,EIO:1", or "-". */
static char *store_errnos(uint64_t *total)
{
	GString *g = g_string_new(NULL);

	*total = 0;
	for (unsigned e = 0; e <= ERRNO_KINDS; e++) {
		uint64_t n = atomic_load(&g_store_errno[e]);
		const char *name = e < ERRNO_KINDS ? strerrorname_np((int)e) : NULL;

		if (!n)
			continue;
		*total += n;
		if (g->len)
			g_string_append_c(g, ',');
		if (name)
			g_string_append_printf(g, "%s:%" PRIu64, name, n);
		else
			g_string_append_printf(g, "%u:%" PRIu64, e, n);
	}
	if (!g->len)
		g_string_append_c(g, '-');
	return g_string_free(g, FALSE);
}

/* What the summary adds for eviction: hit rates, requests' latencies,
 * failed stores, statfs's samples; as "key=value" or JSON members. */
static void summary_eviction(const struct life *s, bool json)
{
	const struct sampler *sm = &s->sm;
	uint64_t store_errors;
	g_autofree char *errnos = store_errnos(&store_errors);
	double hit = ratio(s->hits, s->asked), mib = 1024.0 * 1024.0;
	const char *from = sm->from_mount ? "mount" : "statfs";

	if (!json) {
		printf(" asked=%" PRIu64 " hit_rate=%.4f unbounded_hit=%.4f "
		       "unbounded_timed_hit=%.4f", s->asked, hit, s->unbounded_hit,
		       s->unbounded_timed_hit);
		if (L->lru_blocks)
			printf(" lru_blocks=%" PRIu64 " lru_hit=%.4f lru_ratio=%.4f "
			       "lru_timed_hit=%.4f lru_timed_ratio=%.4f",
			       L->lru_blocks, s->lru_hit, ratio_of(hit, s->lru_hit),
			       s->lru_timed_hit, ratio_of(hit, s->lru_timed_hit));
		printf(" req_p50_us=%.1f req_p99_us=%.1f req_max_us=%.1f "
		       "load_p99_us=%.1f store_p99_us=%.1f store_errors=%" PRIu64
		       " store_enospc=%" PRIu64
		       " store_errno=%s load_gone=%" PRIu64 " statfs_samples=%" PRIu64
		       " statfs_failed=%" PRIu64 " statfs_over=%" PRIu64
		       " statfs_size_MiB=%.1f statfs_max_used_MiB=%.1f "
		       "statfs_max_over_MiB=%.1f usage_from=%s",
		       hist_pct_us(&g_request_ns, 50), hist_pct_us(&g_request_ns, 99),
		       (double)g_request_ns.max / 1e3, hist_pct_us(&g_load_ns, 99),
		       hist_pct_us(&g_store_ns, 99), store_errors,
		       (uint64_t)atomic_load(&g_store_errno[ENOSPC]), errnos,
		       (uint64_t)atomic_load(&g_load_gone), sm->samples, sm->failed,
		       sm->over, (double)sm->size / mib, (double)sm->max_used / mib,
		       (double)sm->max_over / mib, from);
		return;
	}
	printf(", \"asked\": %" PRIu64 ", \"hit_rate\": %.5f, \"unbounded_hit\": %.5f, "
	       "\"unbounded_timed_hit\": %.5f", s->asked, hit, s->unbounded_hit,
	       s->unbounded_timed_hit);
	if (L->lru_blocks)
		printf(", \"lru_blocks\": %" PRIu64 ", \"lru_hit\": %.5f, "
		       "\"lru_ratio\": %.5f, \"lru_timed_hit\": %.5f, "
		       "\"lru_timed_ratio\": %.5f", L->lru_blocks, s->lru_hit,
		       ratio_of(hit, s->lru_hit), s->lru_timed_hit,
		       ratio_of(hit, s->lru_timed_hit));
	printf(", \"req_p50_us\": %.1f, \"req_p99_us\": %.1f, \"req_max_us\": %.1f, "
	       "\"load_p99_us\": %.1f, \"store_p99_us\": %.1f, "
	       "\"store_errors\": %" PRIu64 ", \"store_enospc\": %" PRIu64
	       ", \"store_errno\": \"%s\", \"load_gone\": %" PRIu64
	       ", \"statfs_samples\": %" PRIu64 ", \"statfs_failed\": %" PRIu64
	       ", \"statfs_over\": %" PRIu64 ", \"statfs_size_MiB\": %.1f, "
	       "\"statfs_max_used_MiB\": %.1f, \"statfs_max_over_MiB\": %.1f, "
	       "\"usage_from\": \"%s\"",
	       hist_pct_us(&g_request_ns, 50), hist_pct_us(&g_request_ns, 99),
	       (double)g_request_ns.max / 1e3, hist_pct_us(&g_load_ns, 99),
	       hist_pct_us(&g_store_ns, 99), store_errors,
	       (uint64_t)atomic_load(&g_store_errno[ENOSPC]), errnos,
	       (uint64_t)atomic_load(&g_load_gone), sm->samples, sm->failed, sm->over,
	       (double)sm->size / mib, (double)sm->max_used / mib,
	       (double)sm->max_over / mib, from);
}

static void summary(struct life *s, double secs)
{
	uint64_t stored = atomic_load(&t_store.bytes) / BIO.block_size;
	uint64_t loaded = atomic_load(&t_load.bytes) / BIO.block_size;
	uint64_t hits = s->hits;
	uint64_t errors = all_errors();
	uint64_t evicted = atomic_load(&g_evicted);
	double store_gbs = (double)stored * (double)BIO.block_size / secs / 1e9;
	double load_gbs = (double)loaded * (double)BIO.block_size / secs / 1e9;
	double req_s = (double)s->requests / secs;

	if (!L->json) {
		printf("life: secs=%.3f requests=%" PRIu64 " req/s=%.1f lookups=%"
		       PRIu64 " hits=%" PRIu64 " stored=%" PRIu64 " skipped=%"
		       PRIu64 " loaded=%" PRIu64 " store_GB/s=%.3f "
		       "load_GB/s=%.3f lookup_p50_us=%.1f lookup_p99_us=%.1f "
		       "lookup_max_us=%.1f errors=%" PRIu64 " wrong=%" PRIu64
		       " max_rss_MiB=%.1f max_fds=%ld evicted=%" PRIu64, secs,
		       s->requests, req_s, s->lookup.n, hits, stored,
		       (uint64_t)atomic_load(&t_store.skipped), loaded,
		       store_gbs, load_gbs, hist_pct_us(&s->lookup, 50),
		       hist_pct_us(&s->lookup, 99), (double)s->lookup.max / 1e3,
		       errors, (uint64_t)atomic_load(&t_load.wrong), s->max_rss,
		       s->max_fds, evicted);
		if (s->cpu >= 0)
			printf(" cpu_s=%.3f", s->cpu);
		summary_eviction(s, false);
		putchar('\n');
		return;
	}
	printf("{\"block_size\": %zu, \"threads\": %u, \"families\": %u, "
	       "\"seed\": %" PRIu64 ",\n \"summary\": {\"secs\": %.3f, "
	       "\"requests\": %" PRIu64 ", \"req_per_s\": %.1f, "
	       "\"lookups\": %" PRIu64 ", \"hits\": %" PRIu64 ", "
	       "\"stored\": %" PRIu64 ", \"skipped\": %" PRIu64 ", "
	       "\"loaded\": %" PRIu64 ", \"store_GB_per_s\": %.3f, "
	       "\"load_GB_per_s\": %.3f, \"lookup_p50_us\": %.1f, "
	       "\"lookup_p99_us\": %.1f, \"lookup_max_us\": %.1f, "
	       "\"errors\": %" PRIu64 ", \"wrong\": %" PRIu64 ", "
	       "\"max_rss_MiB\": %.1f, \"max_fds\": %ld, \"evicted\": %" PRIu64,
	       BIO.block_size, L->threads, L->families, L->seed, secs,
	       s->requests, req_s, s->lookup.n, hits, stored,
	       (uint64_t)atomic_load(&t_store.skipped), loaded, store_gbs,
	       load_gbs, hist_pct_us(&s->lookup, 50),
	       hist_pct_us(&s->lookup, 99), (double)s->lookup.max / 1e3, errors,
	       (uint64_t)atomic_load(&t_load.wrong), s->max_rss, s->max_fds,
	       evicted);
	if (s->cpu >= 0)
		printf(", \"cpu_s\": %.3f", s->cpu);
	summary_eviction(s, true);
	printf("},\n \"series\": [");
	for (guint i = 0; i < s->series->len; i++) {
		const struct sample *x = &g_array_index(s->series, struct sample, i);

		printf("%s\n  {\"t\": %.1f, \"requests\": %" PRIu64 ", "
		       "\"req_per_s\": %.1f, \"store_GB_per_s\": %.3f, "
		       "\"load_GB_per_s\": %.3f, \"lookup_p50_us\": %.1f, "
		       "\"lookup_p99_us\": %.1f, \"stored\": %" PRIu64 ", "
		       "\"loaded\": %" PRIu64 ", \"errors\": %" PRIu64 ", "
		       "\"wrong\": %" PRIu64 ", \"rss_MiB\": %.1f, "
		       "\"fds\": %ld}", i ? "," : "", x->t, x->requests,
		       x->req_s, x->store_gbs, x->load_gbs, x->p50_us, x->p99_us,
		       x->stored, x->loaded, x->errors, x->wrong, x->rss_mib,
		       x->fds);
	}
	printf("\n ]}\n");
}

struct sim_play {
	uint64_t requests, asked, hits, evicted;
};

static struct sim_play sim_play(enum kvt_evict_policy policy, uint64_t budget,
				uint64_t block_size, uint64_t requests);

/* The run's stream again through an exact LRU of @budget bytes, with the
 * run's timing: a block is there for a request's lookups only once it
 * would have been stored, as on the file system, where a block still on
 * its way is a miss that is not stored twice.  A block the run stored
 * for a request is there from the moment that store was done; one the
 * LRU misses where the run hit, from the request's end, when its own
 * stores would be done.  So both see the same requests at the same
 * moments, and differ only in what they keep. */
static struct sim_play sim_play_timed(uint64_t budget, uint64_t requests)
{
	struct kvt_evict *e = kvt_evict_new(KVT_EVICT_LRU, &L->tuning);
	g_autoptr(GArray) victims = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	g_autoptr(GHashTable) there_at = g_hash_table_new_full(g_int64_hash, g_int64_equal,
								g_free, g_free);
	struct sim_play p = { 0 };
	struct life s = { 0 };
	uint64_t chain[MAX_CHAIN];

	stream_setup(&s);
	for (; s.requests < requests; s.requests++) {
		gint64 t0 = g_array_index(g_req_t0, gint64, s.requests);
		gint64 t1 = g_array_index(g_req_t1, gint64, s.requests);
		unsigned n = next_request(&s, chain), hits = 0;

		for (; hits < n && kvt_evict_contains(e, chain[hits]); hits++) {
			gint64 *at = g_hash_table_lookup(there_at, &chain[hits]);

			if (*at > t0)
				break;
			kvt_evict_touch(e, chain[hits]);
		}
		for (unsigned i = hits; i < n; i++) {
			g_autofree gpointer mix = stored_mix(s.requests, chain[i]);
			gint64 *done = g_hash_table_lookup(g_stored_at, mix), at;

			if (kvt_evict_contains(e, chain[i]))
				continue;
			at = done ? *done : t1;
			kvt_evict_insert(e, chain[i], BIO.block_size);
			g_hash_table_insert(there_at, g_memdup2(&chain[i], sizeof(chain[i])),
					    g_memdup2(&at, sizeof(at)));
			if (kvt_evict_bytes(e) > budget) {
				kvt_evict_choose(e, kvt_evict_bytes(e) - budget, victims);
				for (guint v = 0; v < victims->len; v++)
					g_hash_table_remove(there_at,
							    &g_array_index(victims, uint64_t, v));
				p.evicted += victims->len;
				g_array_set_size(victims, 0);
			}
		}
		p.asked += n;
		p.hits += hits;
	}
	p.requests = s.requests;
	stream_free(&s);
	kvt_evict_free(e);
	return p;
}

uint64_t life_run(const struct life_opts *o)
{
	struct life s = { .max_rss = -1, .max_fds = -1 };
	double secs;

	L = o;
	setup(&s);
	if (BIO.odirect)
		bio_odirect_probe();
	s.t0 = g_get_monotonic_time();
	s.next_report = s.t0 + (gint64)(L->interval * 1e6);
	s.cpu0 = L->pid ? bio_cpu_secs(L->pid) : -1;
	sampler_start(&s.sm);
	while (!stream_done(&s) &&
	       (L->duration <= 0 || secs_since(s.t0) < L->duration)) {
		serve(&s);
		if (g_get_monotonic_time() >= s.next_report)
			report(&s);
	}
	/* the queued loads and stores belong to the run */
	g_thread_pool_free(s.loads, FALSE, TRUE);
	g_thread_pool_free(s.stores, FALSE, TRUE);
	secs = secs_since(s.t0);
	s.cpu = s.cpu0 >= 0 ? bio_cpu_secs(L->pid) - s.cpu0 : -1;
	sampler_stop(&s.sm);
	if (s.requests) {
		struct sim_play all = sim_play(KVT_EVICT_LRU, UINT64_MAX, BIO.block_size,
					       s.requests);

		s.unbounded_hit = ratio(all.hits, all.asked);
	}
	if (L->lru_blocks && s.requests) {
		struct sim_play lru = sim_play(KVT_EVICT_LRU, L->lru_blocks * BIO.block_size,
					       BIO.block_size, s.requests);

		s.lru_hit = ratio(lru.hits, lru.asked);
		lru = sim_play_timed(L->lru_blocks * BIO.block_size, s.requests);
		s.lru_timed_hit = ratio(lru.hits, lru.asked);
	}
	if (s.requests) {
		struct sim_play all = sim_play_timed(UINT64_MAX, s.requests);

		s.unbounded_timed_hit = ratio(all.hits, all.asked);
	}
	report(&s);
	summary(&s, secs);
	fflush(stdout);
	g_array_free(s.series, TRUE);
	g_hash_table_destroy(g_pending);
	g_queue_init(&g_lru);
	g_hash_table_destroy(g_kept);
	g_array_free(g_req_t0, TRUE);
	g_array_free(g_req_t1, TRUE);
	g_hash_table_destroy(g_stored_at);
	stream_free(&s);
	return all_errors();
}

/* ------------------------------------------------------------------ */
/* --simulate                                                         */

/* LRU first: the others' hits are given as a ratio to its. */
static const enum kvt_evict_policy sim_policy[] = {
	KVT_EVICT_LRU, KVT_EVICT_S3FIFO, KVT_EVICT_SLRU, KVT_EVICT_S3FIFO_ADAPTIVE,
};
#define SIM_POLICIES G_N_ELEMENTS(sim_policy)

/* One stream through one index: a request's blocks are looked up in
 * order until the first miss (the hits are loads, a use each), and the
 * missing ones after it are stored, evicting down to the budget after
 * each store, as a tier that never exceeds it does.  A block found after
 * the first miss is no hit (a server cannot use it) and no use.
 * @requests: that many requests; 0: to the end --requests or --blocks
 * give. */
static struct sim_play sim_play(enum kvt_evict_policy policy, uint64_t budget,
				uint64_t block_size, uint64_t requests)
{
	struct kvt_evict *e = kvt_evict_new(policy, &L->tuning);
	GArray *victims = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	struct sim_play p = { 0 };
	struct life s = { 0 };
	uint64_t chain[MAX_CHAIN];

	stream_setup(&s);
	while (requests ? s.requests < requests : !stream_done(&s)) {
		unsigned n = next_request(&s, chain), hits = 0;

		while (hits < n && kvt_evict_touch(e, chain[hits]))
			hits++;
		for (unsigned i = hits; i < n; i++) {
			if (kvt_evict_contains(e, chain[i]))
				continue;
			kvt_evict_insert(e, chain[i], block_size);
			if (kvt_evict_bytes(e) > budget) {
				kvt_evict_choose(e, kvt_evict_bytes(e) - budget, victims);
				p.evicted += victims->len;
				g_array_set_size(victims, 0);
			}
		}
		p.asked += n;
		p.hits += hits;
		s.requests++;
	}
	p.requests = s.requests;
	stream_free(&s);
	g_array_free(victims, TRUE);
	kvt_evict_free(e);
	return p;
}

/* The blocks the stream stores with room for all: its distinct keys. */
static uint64_t sim_stored_blocks(void)
{
	struct life s = { 0 };
	uint64_t chain[MAX_CHAIN], n;

	stream_setup(&s);
	while (!stream_done(&s)) {
		next_request(&s, chain);
		s.requests++;
	}
	n = s.new_blocks;
	stream_free(&s);
	return n;
}

struct sim_row {
	unsigned scan_pct, fraction;
	uint64_t seed, requests, asked, stored, budget_blocks;
	double unbounded;               /* the hit rate with room for every block */
	double hit[SIM_POLICIES];
	double ratio[SIM_POLICIES];     /* hits / LRU's */
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of n values (n >= 1), and their least and largest. */
static double median_of(double *v, unsigned n, double *lo, double *hi)
{
	qsort(v, n, sizeof(*v), cmp_double);
	*lo = v[0];
	*hi = v[n - 1];
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void sim_print_row(const struct sim_row *r, bool first)
{
	if (L->json)
		printf("%s\n   {\"scan_pct\": %u, \"budget\": \"1/%u\", \"seed\": %" PRIu64
		       ", \"requests\": %" PRIu64 ", \"asked\": %" PRIu64
		       ", \"stored_blocks\": %" PRIu64 ", \"budget_blocks\": %" PRIu64
		       ", \"unbounded_hit\": %.5f", first ? "" : ",", r->scan_pct,
		       r->fraction, r->seed, r->requests, r->asked, r->stored,
		       r->budget_blocks, r->unbounded);
	else
		printf("simulate: scan=%u%% budget=1/%u seed=%" PRIu64 " requests=%"
		       PRIu64 " asked=%" PRIu64 " stored_blocks=%" PRIu64
		       " budget_blocks=%" PRIu64 " unbounded_hit=%.4f", r->scan_pct,
		       r->fraction, r->seed, r->requests, r->asked, r->stored,
		       r->budget_blocks, r->unbounded);
	for (unsigned p = 0; p < SIM_POLICIES; p++) {
		const char *name = kvt_evict_policy_name(sim_policy[p]);

		if (L->json)
			printf(", \"%s_hit\": %.5f", name, r->hit[p]);
		else
			printf(" %s_hit=%.4f", name, r->hit[p]);
		if (p && L->json)
			printf(", \"%s_ratio\": %.6f", name, r->ratio[p]);
		else if (p)
			printf(" %s_ratio=%.6f", name, r->ratio[p]);
	}
	fputs(L->json ? "}" : "\n", stdout);
}

/* @what of one policy: the median over the seeds, the least, the largest. */
static void sim_print_spread(const char *name, const char *what, double *v,
			     unsigned n)
{
	double lo, hi, m = median_of(v, n, &lo, &hi);
	/* a ratio a hair under 1 must not print as 1 */
	int digits = strcmp(what, "ratio") ? 4 : 6;

	if (L->json)
		printf(", \"%s_%s\": %.6f, \"%s_%s_min\": %.6f, \"%s_%s_max\": %.6f",
		       name, what, m, name, what, lo, name, what, hi);
	else
		printf(" %s_%s=%.*f (%.*f-%.*f)", name, what, digits, m, digits, lo,
		       digits, hi);
}

/* The medians over the seeds of one scan and budget; @rows: the seeds'
 * rows, @stride apart. */
static void sim_print_median(const struct sim_row *rows, unsigned stride,
			     unsigned seeds, bool first)
{
	g_autofree double *v = g_new(double, seeds);

	if (L->json)
		printf("%s\n   {\"scan_pct\": %u, \"budget\": \"1/%u\", \"seeds\": %u",
		       first ? "" : ",", rows->scan_pct, rows->fraction, seeds);
	else
		printf("simulate-median: scan=%u%% budget=1/%u seeds=%u",
		       rows->scan_pct, rows->fraction, seeds);
	for (unsigned sd = 0; sd < seeds; sd++)
		v[sd] = rows[sd * stride].unbounded;
	sim_print_spread("unbounded", "hit", v, seeds);
	for (unsigned p = 0; p < SIM_POLICIES; p++) {
		const char *name = kvt_evict_policy_name(sim_policy[p]);

		for (unsigned sd = 0; sd < seeds; sd++)
			v[sd] = rows[sd * stride].hit[p];
		sim_print_spread(name, "hit", v, seeds);
		if (!p)
			continue;
		for (unsigned sd = 0; sd < seeds; sd++)
			v[sd] = rows[sd * stride].ratio[p];
		sim_print_spread(name, "ratio", v, seeds);
	}
	fputs(L->json ? "}" : "\n", stdout);
}

void life_simulate(const struct life_opts *o)
{
	unsigned scans[2] = { 0, o->scan_pct }, n_scans = o->scan_pct ? 2 : 1;
	unsigned nb = o->n_budgets, n_rows = n_scans * o->seeds * nb, k = 0;
	struct sim_row *rows = g_new0(struct sim_row, n_rows);
	struct life_opts one = *o;
	gint64 t0 = g_get_monotonic_time();

	L = &one;
	if (L->json)
		printf("{\"simulate\": {\"families\": %u, \"zipf\": %g, \"seed\": %" PRIu64
		       ", \"seeds\": %u, \"block_size\": %" PRIu64 ", \"hits_of\": "
		       "\"blocks\", \"s3fifo_small_pct\": %u, \"s3fifo_promote_loads\": %u, "
		       "\"slru_protected_pct\": %u,\n  \"runs\": [", o->families, o->zipf,
		       o->seed, o->seeds, o->block_size,
		       o->tuning.small_pct ? o->tuning.small_pct : 10,
		       o->tuning.promote_loads ? o->tuning.promote_loads : 1,
		       o->tuning.protected_pct ? o->tuning.protected_pct : 80);
	for (unsigned sc = 0; sc < n_scans; sc++) {
		for (unsigned sd = 0; sd < o->seeds; sd++) {
			struct sim_play all;
			uint64_t stored;

			one.scan_pct = scans[sc];
			one.seed = o->seed + sd;
			stored = sim_stored_blocks();
			all = sim_play(KVT_EVICT_LRU, UINT64_MAX, L->block_size, 0);
			for (unsigned b = 0; b < nb; b++) {
				struct sim_row *r = &rows[k];

				r->scan_pct = scans[sc];
				r->fraction = o->budgets[b];
				r->seed = one.seed;
				r->stored = stored;
				r->requests = all.requests;
				r->asked = all.asked;
				r->unbounded = all.asked ? (double)all.hits / (double)all.asked : 0;
				r->budget_blocks = stored / o->budgets[b];
				for (unsigned p = 0; p < SIM_POLICIES; p++) {
					struct sim_play x = sim_play(sim_policy[p],
								     r->budget_blocks * L->block_size,
								     L->block_size, 0);

					r->hit[p] = x.asked ? (double)x.hits / (double)x.asked : 0;
					r->ratio[p] = r->hit[0] > 0 ? r->hit[p] / r->hit[0] : 0;
				}
				sim_print_row(r, k == 0);
				k++;
				fflush(stdout);
			}
		}
	}
	if (L->json)
		printf("\n  ],\n  \"medians\": [");
	for (unsigned sc = 0; sc < n_scans; sc++)
		for (unsigned b = 0; b < nb; b++)
			sim_print_median(&rows[sc * o->seeds * nb + b], nb, o->seeds,
					 sc + b == 0);
	if (L->json)
		printf("\n  ],\n  \"secs\": %.3f}}\n", secs_since(t0));
	else
		printf("simulate: secs=%.3f hits counted in blocks (one size: the "
		       "same in bytes)\n", secs_since(t0));
	fflush(stdout);
	g_free(rows);
}
