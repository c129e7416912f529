/*
 * kvclient: concurrent writers and readers of the same names.  lmcache
 * rewrites kv-<key>.pt in place, race renames over published vLLM names;
 * readers check that every read is one whole valid version, and at the end
 * every key is checked once more.  race --shared runs next to another
 * process (on another mount of the same store) writing the same names.
 */
#include "kvclient.h"

static atomic_ullong *g_started;   /* per key: highest version begun */
static atomic_int *g_published;    /* per key: a store has completed */
static atomic_int g_writers_done;

static void atomic_max(atomic_ullong *a, unsigned long long v)
{
	unsigned long long cur = atomic_load(a);

	while (cur < v && !atomic_compare_exchange_weak(a, &cur, v))
		;
}

/* --size-odd: odd versions have another size, so that a name's
 * versions change size as they replace one another. */
static uint64_t version_size(uint64_t ver)
{
	return O.size_odd && (ver & 1) ? O.size_odd : O.size;
}

static uint64_t largest_size(void)
{
	return O.size_odd > O.size ? O.size_odd : O.size;
}

/* The length a whole read must have: any version's (0: the header's). */
static uint64_t want_size(void)
{
	return O.size_odd ? 0 : O.size;
}

static void key_path(char *out, size_t n, uint64_t key)
{
	if (strcmp(O.cmd, "lmcache") == 0)
		pt_path(out, n, key);
	else
		vllm_path(out, n, key);
}

static void *lmcache_writer(void *arg)
{
	struct worker *w = arg;
	struct counters *c = w->c;
	unsigned char *buf = alloc_buf(largest_size());
	char path[PATH_MAX];

	for (int r = 0; r < O.rounds && !stopped(); r++) {
		uint64_t ver = O.version + (uint64_t)r, size = version_size(ver);

		for (uint64_t i = (uint64_t)w->idx; i < O.blocks && !stopped();
		     i += (uint64_t)O.writers) {
			uint64_t key = O.key_base + i;
			size_t done;
			int fd, e;

			pt_path(path, sizeof(path), key);
			fill_block(buf, size, key, ver);
			atomic_max(&g_started[i], ver);
			atomic_fetch_add(&c->ops, 1);
			fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | dflag(),
				  0644);
			if (fd < 0) {
				e = errno;
				if (!store_stops(path, e))
					failf(path, 0, "writer open(O_CREAT|"
					      "O_WRONLY|O_TRUNC): %s", errname(e));
				continue;
			}
			e = write_block(fd, buf, size, O.chunk, &done);
			if (e) {
				close(fd);
				if (!store_stops(path, e))
					failf(path, (long long)done,
					      "writer write: %s", errname(e));
				continue;
			}
			if (close(fd) < 0) {
				e = errno;
				if (!store_stops(path, e))
					failf(path, 0, "writer close: %s",
					      errname(e));
				continue;
			}
			atomic_fetch_add(&c->bytes, size);
			atomic_store(&g_published[i], 1);
			manifest_stored(LAYOUT_PT, key, ver);
			progress_tick(c);
		}
	}
	free(buf);
	return NULL;
}

static void *race_writer(void *arg)
{
	struct worker *w = arg;
	struct counters *c = w->c;
	unsigned char *buf = alloc_buf(largest_size());
	uint64_t rs = thread_seed(w->idx);
	uint64_t suffix = rng_next(&rs) >> 1;
	char dest[PATH_MAX], tmp[PATH_MAX + 32];

	for (int r = 0; r < O.rounds && !stopped(); r++) {
		/* distinct per writer and round: 1..writers*rounds (+base) */
		uint64_t ver = O.version + (uint64_t)r * (uint64_t)O.writers +
			       (uint64_t)w->idx;
		uint64_t size = version_size(ver);

		/* each writer starts at another name, so that the
		 * writers do not move over the names in lockstep */
		for (uint64_t j = 0; j < O.blocks && !stopped(); j++) {
			uint64_t i = (j + (uint64_t)w->idx) % O.blocks;
			uint64_t key = O.key_base + i;
			size_t done;
			int fd, e;

			vllm_path(dest, sizeof(dest), key);
			atomic_fetch_add(&c->ops, 1);
			if (mkdir_parents(dest) < 0) {
				failf(dest, 0, "mkdir -p parent: %s",
				      errname(errno));
				continue;
			}
			snprintf(tmp, sizeof(tmp), "%s_%" PRIu64 ".tmp", dest,
				 suffix);
			fill_block(buf, size, key, ver);
			atomic_max(&g_started[i], ver);
			fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_TRUNC |
				  dflag(), 0644);
			if (fd < 0) {
				failf(tmp, 0, "open(O_CREAT|O_EXCL): %s",
				      errname(errno));
				continue;
			}
			e = write_block(fd, buf, size, 0, &done);
			if (e) {
				close(fd);
				unlink(tmp);
				failf(tmp, (long long)done, "write: %s",
				      errname(e));
				continue;
			}
			if (close(fd) < 0) {
				failf(tmp, 0, "close: %s", errname(errno));
				unlink(tmp);
				continue;
			}
			if (rename(tmp, dest) < 0) {
				failf(dest, 0, "rename over existing name from "
				      "%s: %s", tmp, errname(errno));
				unlink(tmp);
				continue;
			}
			atomic_fetch_add(&c->bytes, size);
			atomic_store(&g_published[i], 1);
			progress_tick(c);
		}
	}
	free(buf);
	return NULL;
}

/* race --shared: the versions this process writes; another process
 * writing the same names uses another range (its own --version). */
/* published names that answered ENOENT later: lost= of the summary */
static atomic_ullong g_lost;

static int own_version(uint64_t v)
{
	return v >= O.version &&
	       v - O.version < (uint64_t)O.rounds * (uint64_t)O.writers;
}

struct rstats {
	atomic_ullong reads, hits, enoent, bytes;
};
static struct rstats g_rs;

static void *reader_thread(void *arg)
{
	struct worker *w = arg;
	size_t cap = largest_size() + ALIGN;
	unsigned char *buf = alloc_buf(cap);
	uint64_t rs = thread_seed(1000 + w->idx);
	uint64_t *seen = calloc(O.blocks, sizeof(*seen));
	int lm = strcmp(O.cmd, "lmcache") == 0;
	char path[PATH_MAX];

	if (!seen)
		die("out of memory");
	while (!atomic_load(&g_writers_done) && !stopped()) {
		uint64_t i = rng_next(&rs) % O.blocks;
		uint64_t key = O.key_base + i, gk, gv;
		int was_published = atomic_load(&g_published[i]);
		int fd;
		ssize_t n;

		key_path(path, sizeof(path), key);
		atomic_fetch_add(&g_rs.reads, 1);
		fd = open(path, O_RDONLY | dflag());
		if (fd < 0) {
			int e = errno;

			if (e != ENOENT) {
				if (!mount_gone(e))
					failf(path, 0, "reader open: %s",
					      errname(e));
			} else if (!lm && was_published) {
				atomic_fetch_add(&g_lost, 1);
				failf(path, 0, "reader open: ENOENT after the "
				      "name was published (rename over an "
				      "existing name must be atomic)");
			} else {
				atomic_fetch_add(&g_rs.enoent, 1);
			}
			continue;
		}
		n = read_whole(fd, buf, cap);
		if (n < 0) {
			if (!mount_gone(errno))
				failf(path, 0, "reader read: %s",
				      errname(errno));
			close(fd);
			continue;
		}
		close(fd);
		if (check_whole(path, buf, (size_t)n, key, 0, want_size(), &gk,
				&gv) < 0)
			continue;
		atomic_fetch_add(&g_rs.hits, 1);
		atomic_fetch_add(&g_rs.bytes, (unsigned long long)n);
		if (O.shared && !own_version(gv))
			; /* another process's: checked whole above */
		else if (gv > atomic_load(&g_started[i])) {
			atomic_fetch_add(&g_wrong, 1);
			failf(path, 8, "version %" PRIu64 " was never written "
			      "(highest begun %llu)", gv,
			      atomic_load(&g_started[i]));
		}
		if (lm && gv < seen[i] && (!O.shared || own_version(gv))) {
			atomic_fetch_add(&g_wrong, 1);
			failf(path, 8, "went back from version %" PRIu64
			      " to older version %" PRIu64, seen[i], gv);
		}
		if (gv > seen[i] && (!O.shared || own_version(gv)))
			seen[i] = gv;
	}
	free(seen);
	free(buf);
	return NULL;
}

int cmd_concurrent(void)
{
	struct counters c = { 0 };
	int lm = strcmp(O.cmd, "lmcache") == 0;
	int nw = O.writers, nr = O.readers, k;
	pthread_t *tw, *tr;
	struct worker *ww, *wr;
	unsigned char *buf;
	char extra[200], path[PATH_MAX];
	double t0 = now_sec();
	unsigned long long final_ok = 0;

	g_started = calloc(O.blocks, sizeof(*g_started));
	g_published = calloc(O.blocks, sizeof(*g_published));
	tw = calloc((size_t)nw, sizeof(*tw));
	tr = calloc((size_t)nr, sizeof(*tr));
	ww = calloc((size_t)nw, sizeof(*ww));
	wr = calloc((size_t)nr, sizeof(*wr));
	if (!g_started || !g_published || !tw || !tr || !ww || !wr)
		die("out of memory");
	/* start from nothing: versions left by an earlier run are unknown
	 * (--shared: another process writes the same names meanwhile) */
	manifest_open();
	for (uint64_t i = 0; i < O.blocks && !O.shared; i++) {
		key_path(path, sizeof(path), O.key_base + i);
		if (unlink(path) < 0 && errno != ENOENT)
			failf(path, 0, "unlink before the run: %s",
			      errname(errno));
		else
			manifest_removed(lm ? LAYOUT_PT : LAYOUT_BIN,
					 O.key_base + i, O.version);
	}
	for (k = 0; k < nr; k++) {
		wr[k].idx = k;
		wr[k].c = &c;
		if (pthread_create(&tr[k], NULL, reader_thread, &wr[k]))
			die("pthread_create failed");
	}
	for (k = 0; k < nw; k++) {
		ww[k].idx = k;
		ww[k].c = &c;
		if (pthread_create(&tw[k], NULL, lm ? lmcache_writer : race_writer,
				   &ww[k]))
			die("pthread_create failed");
	}
	for (k = 0; k < nw; k++)
		pthread_join(tw[k], NULL);
	atomic_store(&g_writers_done, 1);
	for (k = 0; k < nr; k++)
		pthread_join(tr[k], NULL);
	snprintf(extra, sizeof(extra),
		 "stores=%llu reads=%llu hits=%llu enoent=%llu read_bytes=%llu "
		 "wrong=%llu lost=%llu", atomic_load(&c.stored),
		 atomic_load(&g_rs.reads), atomic_load(&g_rs.hits),
		 atomic_load(&g_rs.enoent), atomic_load(&g_rs.bytes),
		 atomic_load(&g_wrong), atomic_load(&g_lost));
	summary("write+read", &c, t0, extra);

	/* final state: every key present with a valid version */
	t0 = now_sec();
	buf = alloc_buf(largest_size() + ALIGN);
	for (uint64_t i = 0; i < O.blocks && !stopped(); i++) {
		uint64_t key = O.key_base + i, gk, gv;
		ssize_t n;
		int fd;

		key_path(path, sizeof(path), key);
		fd = open(path, O_RDONLY);
		if (fd < 0) {
			failf(path, 0, "final read: open: %s", errname(errno));
			continue;
		}
		n = read_whole(fd, buf, largest_size() + ALIGN);
		close(fd);
		if (n < 0) {
			failf(path, 0, "final read: %s", errname(errno));
			continue;
		}
		if (check_whole(path, buf, (size_t)n, key, 0, want_size(), &gk, &gv))
			continue;
		/* --shared: the other process's last version may be last */
		if (lm && gv != O.version + (uint64_t)O.rounds - 1 &&
		    (!O.shared || own_version(gv))) {
			failf(path, 8, "final version %" PRIu64 ", expected the "
			      "last one written, %" PRIu64, gv,
			      O.version + (uint64_t)O.rounds - 1);
			continue;
		}
		final_ok++;
	}
	free(buf);
	printf("%s final: blocks=%llu ok=%llu errors=%llu wrong=%llu "
	       "secs=%.2f\n", O.cmd, (unsigned long long)O.blocks, final_ok,
	       atomic_load(&g_failures), atomic_load(&g_wrong),
	       now_sec() - t0);
	fflush(stdout);
	free(tw);
	free(tr);
	free(ww);
	free(wr);
	return 0;
}
