/* The eviction order (src/store/evict.c): an exact LRU, pins, S3-FIFO's
 * small FIFO against a one-off scan and its ghosts, the bytes chosen, and
 * the memory a block costs.  Prints TAP. */
#include <glib.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "evict.h"

static int n_test, n_fail;

static void ok(bool cond, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

static void ok(bool cond, const char *fmt, ...)
{
	va_list ap;

	n_test++;
	if (!cond)
		n_fail++;
	printf("%sok %d - ", cond ? "" : "not ", n_test);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static const enum kvt_evict_policy policies[] = {
	KVT_EVICT_LRU, KVT_EVICT_S3FIFO, KVT_EVICT_SLRU, KVT_EVICT_S3FIFO_ADAPTIVE,
};

static GArray *keys_new(void)
{
	return g_array_new(FALSE, FALSE, sizeof(uint64_t));
}

static bool holds(GArray *a, uint64_t key)
{
	for (guint i = 0; i < a->len; i++)
		if (g_array_index(a, uint64_t, i) == key)
			return true;
	return false;
}

/* Stores of 1..10, loads of 3 and 1, 5 stored again: the LRU gives them
 * back least recently used first, and stops at the bytes asked. */
static void test_lru_order(void)
{
	static const uint64_t want[] = { 2, 4, 6, 7, 8, 9, 10, 3, 1, 5 };
	struct kvt_evict *e = kvt_evict_new(KVT_EVICT_LRU, NULL);
	GArray *v = keys_new();
	uint64_t got;
	bool same;

	for (uint64_t k = 1; k <= 10; k++)
		kvt_evict_insert(e, k, 100);
	ok(kvt_evict_touch(e, 3) && kvt_evict_touch(e, 1), "lru: loads of held blocks");
	ok(!kvt_evict_touch(e, 11), "lru: a load of a block not held is refused");
	ok(!kvt_evict_insert(e, 5, 100), "lru: a second store is a use, not a new block");
	got = kvt_evict_choose(e, 250, v);
	ok(got == 300 && v->len == 3,
	   "lru: 250 bytes asked, three blocks of 100 chosen (%u)", v->len);
	ok(kvt_evict_bytes(e) == 700 && kvt_evict_count(e) == 7,
	   "lru: 700 bytes, 7 blocks left");
	ok(kvt_evict_choose(e, UINT64_MAX, v) == 700, "lru: the rest chosen");
	same = v->len == G_N_ELEMENTS(want);
	for (guint i = 0; same && i < v->len; i++)
		same = g_array_index(v, uint64_t, i) == want[i];
	ok(same, "lru: least recently used first: 2 4 6 7 8 9 10 3 1 5");
	ok(kvt_evict_count(e) == 0 && kvt_evict_bytes(e) == 0 && !kvt_evict_contains(e, 5),
	   "lru: nothing left");
	g_array_free(v, TRUE);
	kvt_evict_free(e);
}

/* 100 blocks, 10 of them pinned (two pinned twice), some loaded: all the
 * bytes asked, the pinned ones stay until their last unpin. */
static void test_pins(enum kvt_evict_policy p)
{
	const char *name = kvt_evict_policy_name(p);
	struct kvt_evict *e = kvt_evict_new(p, NULL);
	GArray *v = keys_new();
	bool pinned_chosen = false;
	uint64_t got;

	for (uint64_t k = 0; k < 100; k++)
		kvt_evict_insert(e, k, 10);
	for (uint64_t k = 0; k < 100; k += 10)
		ok(kvt_evict_pin(e, k), "%s: pin %" PRIu64, name, k);
	kvt_evict_pin(e, 0);
	kvt_evict_pin(e, 50);
	ok(!kvt_evict_pin(e, 1000), "%s: a pin of a block not held is refused", name);
	for (uint64_t k = 0; k < 100; k += 3)
		kvt_evict_touch(e, k);
	ok(kvt_evict_pinned_bytes(e) == 100, "%s: 100 bytes pinned", name);
	got = kvt_evict_choose(e, UINT64_MAX, v);
	ok(got == 900 && v->len == 90, "%s: every unpinned block chosen (%u)", name, v->len);
	for (uint64_t k = 0; k < 100; k += 10)
		pinned_chosen |= holds(v, k);
	ok(!pinned_chosen, "%s: no pinned block chosen", name);
	g_array_set_size(v, 0);
	ok(kvt_evict_choose(e, UINT64_MAX, v) == 0 && v->len == 0,
	   "%s: all pinned: nothing chosen", name);
	kvt_evict_unpin(e, 0);
	kvt_evict_unpin(e, 50);
	kvt_evict_unpin(e, 10);
	ok(kvt_evict_choose(e, UINT64_MAX, v) == 10 && v->len == 1 &&
	   g_array_index(v, uint64_t, 0) == 10,
	   "%s: a block pinned twice stays after one unpin; the one unpinned goes", name);
	ok(kvt_evict_remove(e, 20) && kvt_evict_pinned_bytes(e) == 80 &&
	   kvt_evict_count(e) == 8, "%s: a pinned block removed elsewhere is forgotten",
	   name);
	kvt_evict_unpin(e, 20);
	ok(kvt_evict_pinned_bytes(e) == 80, "%s: an unpin of a removed block does nothing",
	   name);
	g_array_free(v, TRUE);
	kvt_evict_free(e);
}

/* A budget of 100 blocks: 90 blocks stored once and 10 hot ones, each
 * loaded twice, then a long document of 1000 blocks stored once and
 * never loaded, evicting down to the budget after each store.  S3-FIFO
 * and SLRU keep the hot ones, LRU loses them. */
static unsigned hot_after_scan(enum kvt_evict_policy p)
{
	struct kvt_evict *e = kvt_evict_new(p, NULL);
	GArray *v = keys_new();
	unsigned kept = 0;

	for (uint64_t k = 100; k < 190; k++)
		kvt_evict_insert(e, k, 4096);
	for (uint64_t k = 1; k <= 10; k++)
		kvt_evict_insert(e, k, 4096);
	for (int round = 0; round < 2; round++)
		for (uint64_t k = 1; k <= 10; k++)
			kvt_evict_touch(e, k);
	for (uint64_t k = 1000; k < 2000; k++) {
		kvt_evict_insert(e, k, 4096);
		if (kvt_evict_bytes(e) > 100 * 4096)
			kvt_evict_choose(e, kvt_evict_bytes(e) - 100 * 4096, v);
	}
	for (uint64_t k = 1; k <= 10; k++)
		kept += kvt_evict_contains(e, k);
	ok(kvt_evict_bytes(e) == 100 * 4096 && v->len == 1000,
	   "%s: the scan evicted down to the budget (%u blocks chosen)",
	   kvt_evict_policy_name(p), v->len);
	g_array_free(v, TRUE);
	kvt_evict_free(e);
	return kept;
}

static void test_scan(void)
{
	unsigned lru = hot_after_scan(KVT_EVICT_LRU);
	unsigned s3 = hot_after_scan(KVT_EVICT_S3FIFO);
	unsigned slru = hot_after_scan(KVT_EVICT_SLRU);
	unsigned s3a = hot_after_scan(KVT_EVICT_S3FIFO_ADAPTIVE);

	ok(s3 == 10, "s3fifo: all 10 hot blocks kept over a one-off scan (%u)", s3);
	ok(s3a == 10, "s3fifo_adaptive: all 10 hot blocks kept over the scan (%u)", s3a);
	ok(slru == 10, "slru: all 10 hot blocks kept over the scan (%u)", slru);
	ok(lru == 0, "lru: the scan flushed the hot blocks (%u kept)", lru);
}

/* A budget of 1000 blocks; each step stores a new block and asks again
 * for the one stored 400 steps before (a load if held, else a store):
 * every block comes back once, late.  The LRU keeps them all; S3-FIFO's
 * small FIFO of 10% lets them go before they come back; the adaptive one
 * grows its small FIFO from the ghosts' returns and keeps most. */
static uint64_t late_hits(enum kvt_evict_policy p)
{
	struct kvt_evict *e = kvt_evict_new(p, NULL);
	GArray *v = keys_new();
	uint64_t hits = 0;

	for (uint64_t k = 1; k <= 20000; k++) {
		kvt_evict_insert(e, k, 1);
		if (k > 400 && kvt_evict_touch(e, k - 400))
			hits++;
		else if (k > 400)
			kvt_evict_insert(e, k - 400, 1);
		if (kvt_evict_bytes(e) > 1000)
			kvt_evict_choose(e, kvt_evict_bytes(e) - 1000, v);
		g_array_set_size(v, 0);
	}
	g_array_free(v, TRUE);
	kvt_evict_free(e);
	return hits;
}

static void test_adaptive(void)
{
	uint64_t lru = late_hits(KVT_EVICT_LRU);
	uint64_t s3 = late_hits(KVT_EVICT_S3FIFO);
	uint64_t s3a = late_hits(KVT_EVICT_S3FIFO_ADAPTIVE);

	printf("# hits of blocks back after 400 of 1000: lru %" PRIu64 ", s3fifo %"
	       PRIu64 ", s3fifo_adaptive %" PRIu64 "\n", lru, s3, s3a);
	ok(lru == 19600, "lru: every block back after 400 of 1000 is a hit (%" PRIu64 ")",
	   lru);
	ok(s3 < lru / 2, "s3fifo: its small FIFO lets most go (%" PRIu64 ")", s3);
	ok(s3a >= lru * 9 / 10, "s3fifo_adaptive: its small FIFO grew, 90%% are hits "
	   "(%" PRIu64 ")", s3a);
}

/* A block evicted from the small FIFO leaves its key as a ghost; stored
 * again, it goes to main, and outlives a block stored beside it for the
 * first time. */
static void test_ghost(void)
{
	struct kvt_evict *e = kvt_evict_new(KVT_EVICT_S3FIFO, NULL);
	GArray *v = keys_new();
	uint64_t g0;

	for (uint64_t k = 1; k <= 100; k++)
		kvt_evict_insert(e, k, 1);
	ok(kvt_evict_choose(e, 1, v) == 1 && v->len == 1 &&
	   g_array_index(v, uint64_t, 0) == 1, "s3fifo: the oldest unloaded block goes first");
	ok(!kvt_evict_contains(e, 1) && kvt_evict_ghosts(e) == 1,
	   "s3fifo: its key is a ghost, no block held");
	ok(!kvt_evict_touch(e, 1), "s3fifo: a ghost cannot be loaded");
	g0 = kvt_evict_ghosts(e);
	ok(kvt_evict_insert(e, 1, 1) && kvt_evict_ghosts(e) == g0 - 1,
	   "s3fifo: stored again, it is held and no longer a ghost");
	kvt_evict_insert(e, 500, 1);         /* new, beside it */
	kvt_evict_insert(e, 501, 1);         /* the newest */
	g_array_set_size(v, 0);
	/* the 99 others, 500 and 501 sit in the small FIFO, over its 10%;
	 * its newest block stays while main has one to give */
	kvt_evict_choose(e, 100, v);
	ok(kvt_evict_contains(e, 1), "s3fifo: the block back from the ghost is in main");
	ok(!kvt_evict_contains(e, 500) && holds(v, 500),
	   "s3fifo: the block stored beside it for the first time went");
	ok(kvt_evict_count(e) == 2 && kvt_evict_contains(e, 501),
	   "s3fifo: 2 blocks left, the ghost's and the newest (%" PRIu64 ")",
	   kvt_evict_count(e));
	ok(kvt_evict_ghosts(e) <= kvt_evict_count(e),
	   "s3fifo: no more ghosts than blocks (%" PRIu64 ")", kvt_evict_ghosts(e));
	ok(kvt_evict_remove(e, 1) && !kvt_evict_contains(e, 1) && !kvt_evict_remove(e, 1),
	   "s3fifo: a removal forgets the block");
	g_array_free(v, TRUE);
	kvt_evict_free(e);
}

/* A ghost is known by its name: a block stored again under that name
 * with another key (a new record's inode) is its return, one stored
 * under another name with the ghost's old key is not; a victim kept
 * back (in use) comes back to main without moving the adaptive share. */
static void test_ghost_name(void)
{
	struct kvt_evict *e = kvt_evict_new(KVT_EVICT_S3FIFO, NULL);
	GArray *v = keys_new();

	for (uint64_t k = 1; k <= 100; k++)
		kvt_evict_insert_as(e, k, 1000 + k, 1);
	kvt_evict_choose(e, 2, v);
	ok(v->len == 2 && !kvt_evict_contains(e, 1) && !kvt_evict_contains(e, 2) &&
	   kvt_evict_ghosts(e) == 2, "s3fifo names: blocks 1 and 2 went, ghosts of names 1001-1002");
	/* name 1001 again, as key 7001; key 2 again, under a new name; and
	 * a newest block, which the small FIFO keeps */
	kvt_evict_insert_as(e, 7001, 1001, 1);
	kvt_evict_insert_as(e, 2, 5002, 1);
	ok(kvt_evict_ghosts(e) == 1, "s3fifo names: the return took its ghost; the reused key did not");
	kvt_evict_insert_as(e, 9000, 9000, 1);
	g_array_set_size(v, 0);
	kvt_evict_choose(e, 99, v);
	ok(kvt_evict_contains(e, 7001) && !kvt_evict_contains(e, 2),
	   "s3fifo names: the returned block was in main and stayed; the new one went");
	/* a victim kept back, under its name: held again, and no ghost */
	g_array_set_size(v, 0);
	kvt_evict_insert_as(e, 9001, 9001, 1);
	kvt_evict_choose(e, 1, v);
	ok(v->len == 1 && g_array_index(v, uint64_t, 0) == 9000, "s3fifo names: 9000 chosen");
	kvt_evict_keep(e, 9000, 9000, 1);
	ok(kvt_evict_contains(e, 9000) && !kvt_evict_touch(e, 1001) &&
	   kvt_evict_count(e) == 3, "s3fifo names: kept back, it is held again (%" PRIu64 " held)",
	   kvt_evict_count(e));
	g_array_free(v, TRUE);
	kvt_evict_free(e);
}

/* A budget of a few blocks, whose small FIFO's share is less than one:
 * the block just stored is not the next to go while main has one to
 * give (S3-FIFO alone would take it at once, store after store). */
static void test_few_blocks(void)
{
	struct kvt_evict *e = kvt_evict_new(KVT_EVICT_S3FIFO_ADAPTIVE, NULL);
	GArray *v = keys_new();
	bool kept = true;

	for (uint64_t k = 1; k <= 8; k++) {
		kvt_evict_insert(e, k, 1 << 20);
		kvt_evict_touch(e, k);
	}
	kvt_evict_choose(e, 1 << 20, v);     /* the loaded ones move to main */
	for (uint64_t k = 100; k < 110; k++) {
		kvt_evict_insert(e, k, 1 << 20);
		g_array_set_size(v, 0);
		kvt_evict_choose(e, 1 << 20, v);
		kept = kept && kvt_evict_contains(e, k);
	}
	ok(kept, "adaptive, 8 blocks of 1 MiB: each block stored outlives the choice after it");
	g_array_free(v, TRUE);
	kvt_evict_free(e);
}

/* Random stores, loads, removals, pins and choices: the bytes chosen are
 * the sum of the victims' sizes, what is held goes down by as much, at
 * least the bytes asked go while enough is unpinned, and no victim is
 * pinned. */
static void test_sizes(enum kvt_evict_policy p)
{
	const char *name = kvt_evict_policy_name(p);
	struct kvt_evict *e = kvt_evict_new(p, NULL);
	GHashTable *size = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
	GHashTable *pins = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
	GRand *r = g_rand_new_with_seed(7);
	GArray *v = keys_new();
	unsigned choices = 0, bad_sum = 0, bad_held = 0, short_ = 0, pinned = 0;

	for (int i = 0; i < 200000; i++) {
		uint64_t key = (uint64_t)g_rand_int_range(r, 0, 5000);
		unsigned op = (unsigned)g_rand_int_range(r, 0, 100);

		if (op < 50) {
			uint64_t sz = (uint64_t)g_rand_int_range(r, 1, 1 << 20);

			kvt_evict_insert(e, key, sz);
			g_hash_table_insert(size, g_memdup2(&key, sizeof(key)),
					    GSIZE_TO_POINTER(sz));
		} else if (op < 80) {
			kvt_evict_touch(e, key);
		} else if (op < 84) {
			if (kvt_evict_remove(e, key)) {
				g_hash_table_remove(size, &key);
				g_hash_table_remove(pins, &key);
			}
		} else if (op < 87) {
			if (!g_hash_table_contains(pins, &key) && kvt_evict_pin(e, key))
				g_hash_table_add(pins, g_memdup2(&key, sizeof(key)));
		} else if (op < 90) {
			if (g_hash_table_remove(pins, &key))
				kvt_evict_unpin(e, key);
		} else {
			uint64_t held = kvt_evict_bytes(e), unpinned = held -
					kvt_evict_pinned_bytes(e);
			uint64_t ask = (uint64_t)g_rand_int_range(r, 1, 1 << 24);
			uint64_t got, sum = 0;

			g_array_set_size(v, 0);
			got = kvt_evict_choose(e, ask, v);
			for (guint j = 0; j < v->len; j++) {
				uint64_t k = g_array_index(v, uint64_t, j);

				pinned += g_hash_table_contains(pins, &k);
				sum += GPOINTER_TO_SIZE(g_hash_table_lookup(size, &k));
				g_hash_table_remove(size, &k);
			}
			choices++;
			bad_sum += sum != got;
			bad_held += kvt_evict_bytes(e) != held - got;
			short_ += got < MIN(ask, unpinned);
		}
	}
	ok(choices > 10000, "%s: %u choices made", name, choices);
	ok(bad_sum == 0, "%s: the bytes chosen are the victims' sizes (%u wrong)", name,
	   bad_sum);
	ok(bad_held == 0, "%s: the bytes held went down by the bytes chosen (%u wrong)",
	   name, bad_held);
	ok(short_ == 0, "%s: at least the bytes asked, while there were (%u short)",
	   name, short_);
	ok(pinned == 0, "%s: no pinned victim (%u)", name, pinned);
	ok(kvt_evict_count(e) == g_hash_table_size(size),
	   "%s: the blocks held are those stored and not chosen or removed", name);
	ok(kvt_evict_ghosts(e) <= kvt_evict_count(e),
	   "%s: no more ghost keys than blocks (%" PRIu64 ")", name, kvt_evict_ghosts(e));
	g_array_free(v, TRUE);
	g_rand_free(r);
	g_hash_table_destroy(pins);
	g_hash_table_destroy(size);
	kvt_evict_free(e);
}

static long rss_bytes(void)
{
	long pages_total, pages_res;
	FILE *f = fopen("/proc/self/statm", "re");
	int n;

	if (!f)
		return -1;
	n = fscanf(f, "%ld %ld", &pages_total, &pages_res);
	fclose(f);
	return n == 2 ? pages_res * sysconf(_SC_PAGESIZE) : -1;
}

#define MILLION 1000000u

/* In a child of its own, so that no memory freed before counts: the RSS
 * grown by 1,000,000 blocks (@ghosts: and as many ghost keys, made by
 * storing another million one at a time at a budget of a million),
 * per block held, written to @fd. */
static void measure(enum kvt_evict_policy p, bool ghosts, int fd)
{
	struct kvt_evict *e;
	GArray *v = keys_new();
	long before = rss_bytes();
	double per;

	g_array_set_size(v, 16);
	g_array_set_size(v, 0);
	e = kvt_evict_new(p, NULL);
	for (uint64_t k = 0; k < MILLION; k++)
		kvt_evict_insert(e, k * 0x9e3779b97f4a7c15ULL, 4096);
	for (uint64_t k = MILLION; ghosts && k < 2 * MILLION; k++) {
		kvt_evict_insert(e, k * 0x9e3779b97f4a7c15ULL, 4096);
		kvt_evict_choose(e, 4096, v);
		g_array_set_size(v, 0);
	}
	per = (double)(rss_bytes() - before) / (double)kvt_evict_count(e);
	if (before < 0 || kvt_evict_count(e) != MILLION ||
	    (ghosts && kvt_evict_ghosts(e) < MILLION / 2))
		per = -1;
	if (write(fd, &per, sizeof(per)) != sizeof(per))
		_exit(1);
	_exit(0);
}

static void test_memory(enum kvt_evict_policy p, bool ghosts)
{
	const char *name = kvt_evict_policy_name(p);
	double per = -1;
	int fds[2], status;
	pid_t pid;

	if (pipe(fds) < 0 || (pid = fork()) < 0) {
		ok(false, "%s: fork for the memory measurement", name);
		return;
	}
	if (pid == 0) {
		close(fds[0]);
		measure(p, ghosts, fds[1]);
	}
	close(fds[1]);
	if (read(fds[0], &per, sizeof(per)) != sizeof(per))
		per = -1;
	close(fds[0]);
	waitpid(pid, &status, 0);
	printf("# %s%s: %.1f bytes per block over 1,000,000 blocks (RSS)\n", name,
	       ghosts ? " with as many ghosts" : "", per);
#ifdef __SANITIZE_ADDRESS__
	/* AddressSanitizer's allocator pads every allocation: what it
	 * measures is not the index's memory. */
	ok(per > 0, "%s%s: 1,000,000 blocks at %.1f bytes each (under AddressSanitizer: "
	   "no bound)", name, ghosts ? " and their ghosts" : "", per);
#else
	ok(per > 0 && per <= KVT_EVICT_MAX_BYTES_PER_BLOCK,
	   "%s%s: 1,000,000 blocks at %.1f bytes each, at most %d", name,
	   ghosts ? " and their ghosts" : "", per, KVT_EVICT_MAX_BYTES_PER_BLOCK);
#endif
}

int main(void)
{
	printf("1..%d\n", 8 + 4 * (18 + 7) + 2 * 4 + 3 + 9 + 3 + 5 + 1);
	test_lru_order();
	for (unsigned i = 0; i < G_N_ELEMENTS(policies); i++) {
		test_pins(policies[i]);
		test_sizes(policies[i]);
	}
	test_scan();
	test_adaptive();
	test_ghost();
	test_ghost_name();
	test_few_blocks();
	test_memory(KVT_EVICT_LRU, false);
	test_memory(KVT_EVICT_S3FIFO, false);
	test_memory(KVT_EVICT_S3FIFO, true);
	return n_fail ? 1 : 0;
}
