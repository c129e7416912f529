/*
 * kvclient: the llm-d client.  llmd-store (probe open, utimensat on a hit,
 * tmp written in chunks and renamed while open), llmd-load (tail preads at
 * non-zero offsets) and llmd, which runs both.
 */
#include "kvclient.h"

static int ts_cmp(const struct timespec *a, const struct timespec *b)
{
	if (a->tv_sec != b->tv_sec)
		return a->tv_sec < b->tv_sec ? -1 : 1;
	if (a->tv_nsec != b->tv_nsec)
		return a->tv_nsec < b->tv_nsec ? -1 : 1;
	return 0;
}

static void llmd_touch(const char *dest, struct counters *c)
{
	struct stat before, after;
	struct timespec t0, tv[2];

	if (stat(dest, &before) < 0) {
		failf(dest, 0, "stat after probe open: %s", errname(errno));
		return;
	}
	clock_gettime(CLOCK_REALTIME, &t0);
	tv[0].tv_sec = 0;
	tv[0].tv_nsec = UTIME_NOW;
	tv[1].tv_sec = 0;
	tv[1].tv_nsec = UTIME_OMIT;
	if (utimensat(AT_FDCWD, dest, tv, 0) < 0) {
		failf(dest, 0, "utimensat(atime=NOW, mtime=OMIT): %s",
		      errname(errno));
		return;
	}
	if (stat(dest, &after) < 0) {
		failf(dest, 0, "stat after utimensat: %s", errname(errno));
		return;
	}
	if (ts_cmp(&before.st_mtim, &after.st_mtim) != 0)
		failf(dest, 0, "utimensat(mtime=OMIT) changed mtime %lld.%09ld"
		      " -> %lld.%09ld", (long long)before.st_mtim.tv_sec,
		      before.st_mtim.tv_nsec, (long long)after.st_mtim.tv_sec,
		      after.st_mtim.tv_nsec);
	/* second granularity: the daemon may not keep nanoseconds */
	if (after.st_atim.tv_sec < t0.tv_sec)
		failf(dest, 0, "utimensat(atime=NOW) did not move atime: "
		      "before %lld, after %lld, call at %lld",
		      (long long)before.st_atim.tv_sec,
		      (long long)after.st_atim.tv_sec, (long long)t0.tv_sec);
	if (after.st_size != (off_t)O.size)
		failf(dest, (long long)after.st_size,
		      "existing block has size %lld, expected %zu",
		      (long long)after.st_size, O.size);
	atomic_fetch_add(&c->touched, 1);
}

static void *llmd_store_thread(void *arg)
{
	struct worker *w = arg;
	struct counters *c = w->c;
	unsigned char *buf = alloc_buf(O.size);
	uint64_t rs = thread_seed(w->idx);
	char dest[PATH_MAX], tmp[PATH_MAX + 32];
	long long i;

	while ((i = next_index()) >= 0) {
		uint64_t key = O.key_base + (uint64_t)i;
		size_t done;
		int fd, e;

		vllm_path(dest, sizeof(dest), key);
		atomic_fetch_add(&c->ops, 1);
		/* ifstream(dest).good() */
		fd = open(dest, O_RDONLY);
		if (fd >= 0) {
			close(fd);
			atomic_fetch_add(&c->skipped, 1);
			llmd_touch(dest, c);
			continue;
		}
		if (errno != ENOENT) {
			failf(dest, 0, "probe open(O_RDONLY): %s", errname(errno));
			continue;
		}
		if (mkdir_parents(dest) < 0) {
			e = errno;
			if (!store_enospc(dest, e))
				failf(dest, 0, "mkdir -p parent: %s", errname(e));
			continue;
		}
		snprintf(tmp, sizeof(tmp), "%s_%" PRIu32 ".tmp", dest,
			 (uint32_t)rng_next(&rs));
		fill_block(buf, O.size, key, O.version);
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | dflag(), 0644);
		if (fd < 0) {
			e = errno;
			if (!store_enospc(dest, e))
				failf(tmp, 0, "open(O_WRONLY|O_CREAT|O_TRUNC): %s",
				      errname(e));
			continue;
		}
		e = write_block(fd, buf, O.size, O.chunk, &done);
		if (e) {
			close(fd);
			unlink(tmp);
			if (!store_enospc(dest, e))
				failf(tmp, (long long)done, "write: %s",
				      errname(e));
			continue;
		}
		atomic_fetch_add(&c->bytes, O.size);
		/* rename while the fd is still open, close afterwards */
		if (rename(tmp, dest) < 0) {
			e = errno;
			close(fd);
			unlink(tmp);
			if (!store_enospc(dest, e))
				failf(dest, 0, "rename (fd open) from %s: %s", tmp,
				      errname(e));
			continue;
		}
		if (close(fd) < 0) {
			e = errno;
			if (!store_enospc(dest, e))
				failf(dest, 0, "close after rename: %s",
				      errname(e));
			continue;
		}
		progress_tick(c);
	}
	free(buf);
	return NULL;
}

static int llmd_pread_check(int fd, const char *path, unsigned char *buf,
			    uint64_t key, uint64_t off, uint64_t len,
			    struct counters *c)
{
	ssize_t n;
	long long bad;

	n = pread(fd, buf, len, (off_t)off);
	if (n < 0) {
		failf(path, (long long)off, "pread of %" PRIu64 " bytes: %s",
		      len, errname(errno));
		return -1;
	}
	if ((uint64_t)n != len) {
		failf(path, (long long)off + n, "short pread: %zd of %" PRIu64
		      " bytes at offset %" PRIu64, n, len, off);
		return -1;
	}
	atomic_fetch_add(&c->bytes, (unsigned long long)n);
	bad = check_range(buf, off, len, key, O.version, O.size);
	if (bad >= 0) {
		failf(path, bad, "tail data differs from key %" PRIu64
		      " version %" PRIu64, key, O.version);
		return -1;
	}
	return 0;
}

static void *llmd_load_thread(void *arg)
{
	struct worker *w = arg;
	struct counters *c = w->c;
	unsigned char *buf = alloc_buf(O.size);
	uint64_t rs = thread_seed(w->idx);
	char path[PATH_MAX];
	long long i;

	while ((i = next_index()) >= 0) {
		uint64_t key = O.key_base + (uint64_t)i;
		uint64_t sz = O.size, offs[8], lens[8];
		int fd, k, n = 0;
		off_t end;
		ssize_t r;

		vllm_path(path, sizeof(path), key);
		atomic_fetch_add(&c->ops, 1);
		fd = open(path, O_RDONLY | dflag());
		if (fd < 0) {
			failf(path, 0, "open: %s", errname(errno));
			continue;
		}
		end = lseek(fd, 0, SEEK_END);
		if (end < 0) {
			failf(path, 0, "lseek(SEEK_END): %s", errname(errno));
			close(fd);
			continue;
		}
		if ((uint64_t)end != sz) {
			failf(path, (long long)end, "lseek(SEEK_END) = %lld, "
			      "expected %" PRIu64, (long long)end, sz);
			close(fd);
			continue;
		}
		/* the tail: second half, last page, last chunk, a random page */
		offs[n] = sz / 2 / ALIGN * ALIGN;
		lens[n++] = sz - offs[0];
		if (sz >= 2 * ALIGN) {
			offs[n] = sz - ALIGN;
			lens[n++] = ALIGN;
			offs[n] = (rng_next(&rs) % (sz / ALIGN - 1) + 1) * ALIGN;
			lens[n++] = ALIGN;
		}
		if (sz > O.chunk && O.chunk % ALIGN == 0) {
			offs[n] = sz - O.chunk;
			lens[n++] = O.chunk;
		}
		if (!dflag() && sz > 64) {
			/* unaligned tail reads (buffered only) */
			offs[n] = sz / 2 + 17;
			lens[n++] = sz - (sz / 2 + 17);
			offs[n] = sz - 1;
			lens[n++] = 1;
		}
		for (k = 0; k < n && !stopped(); k++)
			if (llmd_pread_check(fd, path, buf, key, offs[k], lens[k],
					     c) < 0)
				break;
		if (k == n) {
			/* reading at EOF returns 0 */
			r = pread(fd, buf, ALIGN, (off_t)sz);
			if (r != 0)
				failf(path, (long long)sz, "pread at EOF returned "
				      "%zd (%s), expected 0", r,
				      r < 0 ? errname(errno) : "data");
		}
		if (close(fd) < 0)
			failf(path, 0, "close: %s", errname(errno));
	}
	free(buf);
	return NULL;
}

int cmd_llmd_store(const char *phase)
{
	struct counters c = { 0 };
	char extra[160];
	double t0 = now_sec();

	run_threads(O.threads, llmd_store_thread, &c);
	snprintf(extra, sizeof(extra), "stored=%llu present=%llu touched=%llu",
		 atomic_load(&c.stored), atomic_load(&c.skipped),
		 atomic_load(&c.touched));
	summary(phase, &c, t0, extra);
	return 0;
}

int cmd_llmd_load(void)
{
	struct counters c = { 0 };
	double t0 = now_sec();

	run_threads(O.threads, llmd_load_thread, &c);
	summary("load", &c, t0, NULL);
	return 0;
}

int cmd_llmd(void)
{
	cmd_llmd_store("store");
	if (atomic_load(&g_failures))
		return 0;
	cmd_llmd_store("store-again");
	if (atomic_load(&g_failures))
		return 0;
	return cmd_llmd_load();
}
