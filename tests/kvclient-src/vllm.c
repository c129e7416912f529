/*
 * kvclient: the vLLM client.  vllm-store and vllm-load, and on the same
 * load path the one-block probe (read() or mmap, an optional second read on
 * the open fd) and the paths listing of the vLLM layout.
 */
#include "kvclient.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>

/* The probe failed with errno @e at @step: with --report (a run under
 * injected faults) it says so on stdout ("probe <step> <ERRNO>") and goes
 * on with buffered I/O, as vLLM falls back when its probe fails; else a
 * failure. */
static int probe_failed(const char *path, const char *step, int e)
{
	if (O.report) {
		printf("probe %s %s\n", step, errname(e));
		fflush(stdout);
		O.odirect = 0;
		return 0;
	}
	failf(path, 0, "O_DIRECT probe: %s: %s", step, errname(e));
	return -1;
}

static int odirect_probe(void)
{
	char path[PATH_MAX];
	unsigned char *buf = alloc_buf(ALIGN);
	int fd, rc = -1;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/.o_direct_probe_%d.tmp", O.dir,
		 (int)getpid());
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0) {
		rc = probe_failed(path, "open", errno);
		goto out;
	}
	memset(buf, 0x5a, ALIGN);
	n = write(fd, buf, ALIGN);
	if (n != ALIGN) {
		int e = errno;

		close(fd);
		unlink(path);
		if (n >= 0)
			failf(path, n, "O_DIRECT probe: write 4096: short write");
		else
			rc = probe_failed(path, "write 4096", e);
		goto out;
	}
	if (close(fd) < 0) {
		int e = errno;

		unlink(path);
		rc = probe_failed(path, "close", e);
		goto out;
	}
	if (unlink(path) < 0) {
		failf(path, 0, "O_DIRECT probe: unlink: %s", errname(errno));
		goto out;
	}
	if (access(path, F_OK) == 0 || errno != ENOENT) {
		failf(path, 0, "O_DIRECT probe: name still visible after unlink");
		goto out;
	}
	rc = 0;
out:
	free(buf);
	return rc;
}

static atomic_ullong g_store_failed;

/*
 * --report: a store of block @key failed at @step with errno @e, after
 * the client cleaned up as vLLM does.  Reported on stdout, not a failure;
 * but the name must not exist unless the step came after the rename
 * (fsync).  Returns 1 if handled so, 0 without --report.
 */
static int store_report(uint64_t key, const char *dest, const char *step, int e)
{
	int after_rename = !strcmp(step, "fsync");

	if (!O.report)
		return 0;
	atomic_fetch_add(&g_store_failed, 1);
	pthread_mutex_lock(&g_out_mu);
	printf("%" PRIu64 " %s %s\n", key, step, errname(e));
	pthread_mutex_unlock(&g_out_mu);
	if (access(dest, F_OK) == 0) {
		if (!after_rename)
			failf(dest, 0, "store failed at %s with %s but the name exists",
			      step, errname(e));
	} else if (errno != ENOENT || after_rename) {
		failf(dest, 0, "access after a store that failed at %s: %s (expected %s)",
		      step, errname(errno), after_rename ? "the name" : "ENOENT");
	}
	return 1;
}

/* vllm-load --manifest: the keys to load, from manifest_keys(). */
static uint64_t *g_keys;

static uint64_t key_of(long long i)
{
	return g_keys ? g_keys[i] : O.key_base + (uint64_t)i;
}

/* fsync of @path opened read-only (@dir: of its directory): what makes a
 * block durable once it has its final name.  0 or an errno. */
static int fsync_path(const char *path, int dir)
{
	char parent[PATH_MAX];
	int fd, e = 0;

	if (dir) {
		snprintf(parent, sizeof(parent), "%s", path);
		*strrchr(parent, '/') = '\0';
		path = parent;
	}
	fd = open(path, O_RDONLY | (dir ? O_DIRECTORY : 0));

	if (fd < 0)
		return errno;
	if (fsync(fd) < 0)
		e = errno;
	if (close(fd) < 0 && !e)
		e = errno;
	return e;
}

static void *vllm_store_thread(void *arg)
{
	struct worker *w = arg;
	struct counters *c = w->c;
	unsigned char *buf = alloc_buf(O.size);
	uint64_t rs = thread_seed(w->idx);
	uint64_t suffix = rng_next(&rs) >> 1; /* u63, reused per thread */
	char dest[PATH_MAX], tmp[PATH_MAX + 32];
	long long i;

	while ((i = next_index()) >= 0) {
		uint64_t key = O.key_base + (uint64_t)i;
		size_t done;
		int fd, e;

		vllm_path(dest, sizeof(dest), key);
		atomic_fetch_add(&c->ops, 1);
		if (access(dest, F_OK) == 0) {
			atomic_fetch_add(&c->skipped, 1);
			continue;
		}
		if (errno != ENOENT) {
			if (!mount_gone(errno))
				failf(dest, 0, "access(F_OK): %s",
				      errname(errno));
			continue;
		}
		if (mkdir_parents(dest) < 0) {
			e = errno;
			if (!store_report(key, dest, "mkdir", e) && !store_stops(dest, e))
				failf(dest, 0, "mkdir -p parent: %s", errname(e));
			continue;
		}
		if (O.no_rename)
			suffix = rng_next(&rs) >> 1;
		if (O.in_place)
			snprintf(tmp, sizeof(tmp), "%s", dest);
		else
			snprintf(tmp, sizeof(tmp), "%s_%" PRIu64 ".tmp", dest, suffix);
		fill_block(buf, O.size, key, O.version);
		fd = open(tmp, (O.in_place ? 0 : O_EXCL) | O_CREAT | O_WRONLY | O_TRUNC |
			  dflag(), 0644);
		if (fd < 0) {
			e = errno;
			if (!store_report(key, dest, "open", e) && !store_stops(dest, e))
				failf(tmp, 0, "open(O_CREAT%s%s): %s",
				      O.in_place ? "" : "|O_EXCL",
				      dflag() ? "|O_DIRECT" : "", errname(e));
			continue;
		}
		e = write_block(fd, buf, O.size, 0, &done);
		if (e) {
			close(fd);
			unlink(tmp);
			if (!store_report(key, dest, "write", e) && !store_stops(dest, e))
				failf(tmp, (long long)done,
				      "write of %zu bytes: %s after %zu bytes",
				      O.size, errname(e), done);
			continue;
		}
		atomic_fetch_add(&c->bytes, O.size);
		if (O.fsync && fsync(fd) < 0) {
			e = errno;
			close(fd);
			if (!O.in_place)
				unlink(tmp);
			if (O.in_place || !store_report(key, dest, "fsync-staged", e))
				failf(tmp, 0, "fsync: %s", errname(e));
			continue;
		}
		if (close(fd) < 0) {
			e = errno;
			unlink(tmp);
			if (!store_report(key, dest, "close", e) && !store_stops(dest, e))
				failf(tmp, 0, "close: %s", errname(e));
			continue;
		}
		if (O.no_rename) {
			atomic_fetch_add(&c->tmps, 1);
			continue;
		}
		if (!O.in_place && rename(tmp, dest) < 0) {
			e = errno;
			unlink(tmp);
			if (!store_report(key, dest, "rename", e) && !store_stops(dest, e))
				failf(dest, 0, "rename from %s: %s", tmp,
				      errname(e));
			continue;
		}
		if (O.fsync && !O.in_place && (e = fsync_path(dest, O.fsync_dir))) {
			if (!store_report(key, dest, "fsync", e))
				failf(dest, 0, "fsync of the %s after the rename: %s",
				      O.fsync_dir ? "directory" : "file", errname(e));
			continue;
		}
		manifest_stored(LAYOUT_BIN, key, O.version);
		progress_tick(c);
	}
	free(buf);
	return NULL;
}

/*
 * The outcome of one load of a block, as a client sees it.  A load either
 * returns every byte right (OC_OK) or fails with ENOENT or EIO; a short
 * count, wrong bytes or another errno is never an acceptable answer.
 */
enum outcome { OC_OK, OC_ENOENT, OC_EIO, OC_SHORT, OC_WRONG, OC_SIGBUS,
	       OC_ERROR };

struct load_res {
	enum outcome oc;
	long long val;    /* OC_SHORT: bytes read; OC_WRONG, OC_SIGBUS: offset */
	const char *step; /* "access", "open", "read", "mmap", "close" */
	int err;          /* errno of OC_ENOENT, OC_EIO, OC_ERROR */
};

static struct load_res res_errno(const char *step, int e)
{
	struct load_res r = { OC_ERROR, 0, step, e };

	if (e == ENOENT)
		r.oc = OC_ENOENT;
	else if (e == EIO)
		r.oc = OC_EIO;
	return r;
}

/* The outcome word(s) printed by probe: "ok", "short 4096", ... */
static void res_word(const struct load_res *r, char *out, size_t n)
{
	switch (r->oc) {
	case OC_OK: snprintf(out, n, "ok"); break;
	case OC_ENOENT: snprintf(out, n, "enoent"); break;
	case OC_EIO: snprintf(out, n, "eio"); break;
	case OC_SHORT: snprintf(out, n, "short %lld", r->val); break;
	case OC_WRONG: snprintf(out, n, "wrong %lld", r->val); break;
	case OC_SIGBUS: snprintf(out, n, "sigbus %lld", r->val); break;
	case OC_ERROR: snprintf(out, n, "error %s", errname(r->err)); break;
	}
}

/* A sentence for a failure message. */
static void res_msg(const struct load_res *r, uint64_t len, char *out,
		    size_t n)
{
	const char *d = dflag() ? "|O_DIRECT" : "";

	switch (r->oc) {
	case OC_OK:
		snprintf(out, n, "ok");
		break;
	case OC_SHORT:
		snprintf(out, n, "short read: %lld of %" PRIu64 " bytes",
			 r->val, len);
		break;
	case OC_WRONG:
		snprintf(out, n, "wrong data (first wrong byte at file offset "
			 "%lld)", r->val);
		break;
	case OC_SIGBUS:
		snprintf(out, n, "SIGBUS reading the mapping at file offset "
			 "%lld", r->val);
		break;
	default:
		if (!strcmp(r->step, "access"))
			snprintf(out, n, "lookup access(F_OK): %s",
				 errname(r->err));
		else if (!strcmp(r->step, "open"))
			snprintf(out, n, "open(O_RDONLY%s): %s",
				 O.mmap ? "" : d, errname(r->err));
		else if (!strcmp(r->step, "read"))
			snprintf(out, n, "read of %" PRIu64 " bytes: %s", len,
				 errname(r->err));
		else
			snprintf(out, n, "%s: %s", r->step, errname(r->err));
		break;
	}
}

/* Read [off, O.size) of block @key on @fd with ONE call (read() at offset
 * 0, as vLLM does; pread() otherwise) and compare. */
static struct load_res read_check(int fd, uint64_t key, unsigned char *buf,
				  uint64_t off, int use_pread)
{
	struct load_res r = { OC_OK, 0, "read", 0 };
	uint64_t len = O.size - off;
	long long bad;
	ssize_t n;

	memset(buf, 0xee, len);
	if (use_pread || off)
		n = pread(fd, buf, len, (off_t)off);
	else
		n = read(fd, buf, len);
	if (n < 0)
		return res_errno("read", errno);
	if ((uint64_t)n < len) {
		r.oc = OC_SHORT;
		r.val = n;
		return r;
	}
	bad = check_range(buf, off, len, key, O.version, O.size);
	if (bad >= 0) {
		r.oc = OC_WRONG;
		r.val = bad;
	}
	return r;
}

static sigjmp_buf g_bus_jmp;
static volatile sig_atomic_t g_bus_armed;

static void on_sigbus(int sig)
{
	(void)sig;
	if (g_bus_armed)
		siglongjmp(g_bus_jmp, 1);
	signal(SIGBUS, SIG_DFL);
	raise(SIGBUS);
}

/* Copy [off, O.size) of the block out of a shared read-only mapping. */
static struct load_res mmap_check(int fd, uint64_t key, unsigned char *buf,
				  uint64_t off)
{
	struct load_res r = { OC_OK, 0, "mmap", 0 };
	volatile uint64_t pos = off;
	unsigned char *m;
	long long bad;

	m = mmap(NULL, O.size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return res_errno("mmap", errno);
	signal(SIGBUS, on_sigbus);
	if (sigsetjmp(g_bus_jmp, 1) == 0) {
		g_bus_armed = 1;
		/* page by page, so that a SIGBUS names its page */
		while (pos < O.size) {
			uint64_t n = O.size - pos < ALIGN ? O.size - pos : ALIGN;

			memcpy(buf + (pos - off), m + pos, n);
			pos += n;
		}
		g_bus_armed = 0;
	} else {
		g_bus_armed = 0;
		munmap(m, O.size);
		r.oc = OC_SIGBUS;
		r.val = (long long)pos;
		return r;
	}
	munmap(m, O.size);
	bad = check_range(buf, off, O.size - off, key, O.version, O.size);
	if (bad >= 0) {
		r.oc = OC_WRONG;
		r.val = bad;
	}
	return r;
}

/*
 * One load of block @key at @path: access(F_OK), open, one read from @off
 * (or through mmap with --mmap), compare.  With @fdp the fd stays open and
 * is returned there (-1 if the open failed); else it is closed.
 */
static struct load_res load_once(const char *path, uint64_t key,
				 unsigned char *buf, uint64_t off, int *fdp)
{
	struct load_res r;
	int fd;

	if (fdp)
		*fdp = -1;
	if (access(path, F_OK) < 0)
		return res_errno("access", errno);
	fd = open(path, O_RDONLY | (O.mmap ? 0 : dflag()));
	if (fd < 0)
		return res_errno("open", errno);
	if (O.mmap)
		r = mmap_check(fd, key, buf, off);
	else
		r = read_check(fd, key, buf, off, 0);
	if (fdp) {
		*fdp = fd;
	} else if (close(fd) < 0 && r.oc == OC_OK) {
		r = res_errno("close", errno);
	}
	return r;
}

static struct {
	atomic_ullong ok, enoent, eio;
} g_report;

static pthread_barrier_t g_same_barrier;

/* The next key index for this thread: the shared counter, or with --same
 * every index in turn, after all threads are ready for it. */
static long long next_load_index(long long *mine)
{
	if (!O.same)
		return next_index();
	if (++*mine >= (long long)O.blocks)
		return -1;
	pthread_barrier_wait(&g_same_barrier);
	return *mine;
}

static void *vllm_load_thread(void *arg)
{
	struct worker *w = arg;
	struct counters *c = w->c;
	unsigned char *buf = alloc_buf(O.size);
	char path[PATH_MAX], msg[200];
	long long i, mine = -1;

	while ((i = next_load_index(&mine)) >= 0) {
		uint64_t key = key_of(i);
		struct load_res r;

		vllm_path(path, sizeof(path), key);
		atomic_fetch_add(&c->ops, 1);
		r = load_once(path, key, buf, 0, NULL);
		if (r.oc == OC_OK) {
			atomic_fetch_add(&c->bytes, O.size);
			atomic_fetch_add(&g_report.ok, 1);
			continue;
		}
		if (O.report) {
			res_word(&r, msg, sizeof(msg));
			pthread_mutex_lock(&g_out_mu);
			printf("%" PRIu64 " %s %s\n", key, r.step, msg);
			pthread_mutex_unlock(&g_out_mu);
			if (r.oc == OC_ENOENT) {
				atomic_fetch_add(&g_report.enoent, 1);
				continue;
			}
			if (r.oc == OC_EIO) {
				atomic_fetch_add(&g_report.eio, 1);
				continue;
			}
		}
		if (r.oc == OC_WRONG) {
			/* the detailed account: header, key, version, offset */
			check_whole(path, buf, O.size, key, O.version, O.size,
				    NULL, NULL);
			continue;
		}
		res_msg(&r, O.size, msg, sizeof(msg));
		failf(path, r.oc == OC_SHORT ? r.val : 0, "%s", msg);
	}
	free(buf);
	return NULL;
}

int cmd_vllm_store(void)
{
	struct counters c = { 0 };
	char extra[160];
	double t0 = now_sec();

	manifest_open();
	if (O.odirect > 0 && odirect_probe() < 0)
		return 1;
	run_threads(O.threads, vllm_store_thread, &c);
	snprintf(extra, sizeof(extra), "stored=%llu skipped=%llu tmp_left=%llu",
		 atomic_load(&c.stored), atomic_load(&c.skipped),
		 atomic_load(&c.tmps));
	if (O.report)
		snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
			 " failed=%llu", atomic_load(&g_store_failed));
	summary("store", &c, t0, extra);
	return 0;
}

int cmd_vllm_load(void)
{
	struct counters c = { 0 };
	char extra[160];
	double t0 = now_sec();

	if (O.manifest)
		O.blocks = (long long)manifest_keys(&g_keys);
	if (O.same &&
	    pthread_barrier_init(&g_same_barrier, NULL, (unsigned)O.threads))
		die("pthread_barrier_init failed");
	run_threads(O.threads, vllm_load_thread, &c);
	if (O.same)
		pthread_barrier_destroy(&g_same_barrier);
	snprintf(extra, sizeof(extra), "ok=%llu enoent=%llu eio=%llu",
		 atomic_load(&g_report.ok), atomic_load(&g_report.enoent),
		 atomic_load(&g_report.eio));
	summary("load", &c, t0, O.report ? extra : NULL);
	return 0;
}

/* ------------------------------------------------------------------ */
/* probe, paths                                                       */

static void probe_print(const char *path, const struct load_res *r)
{
	char word[64], msg[200];

	res_word(r, word, sizeof(word));
	printf("%s\n", word);
	fflush(stdout);
	if (r->oc != OC_OK) {
		res_msg(r, O.size - O.offset, msg, sizeof(msg));
		fprintf(stderr, "kvclient probe: %s: %s\n", path, msg);
	}
}

int cmd_probe(void)
{
	unsigned char *buf = alloc_buf(O.size);
	uint64_t key = O.key_base;
	char path[PATH_MAX];
	struct load_res r;
	int fd, bad;

	if (O.file)
		snprintf(path, sizeof(path), "%s/%s", O.dir, O.file);
	else
		vllm_path(path, sizeof(path), key);
	r = load_once(path, key, buf, O.offset, O.reread_after ? &fd : NULL);
	probe_print(path, &r);
	bad = r.oc != OC_OK;
	if (O.reread_after && fd >= 0) {
		double t0 = now_sec();

		while (access(O.reread_after, F_OK) < 0) {
			if (now_sec() - t0 > 120)
				die("probe: %s did not appear within 120 s",
				    O.reread_after);
			usleep(10000);
		}
		if (O.mmap)
			r = mmap_check(fd, key, buf, O.offset);
		else
			r = read_check(fd, key, buf, O.offset, 1);
		probe_print(path, &r);
		bad |= r.oc != OC_OK;
		if (close(fd) < 0)
			fprintf(stderr, "kvclient probe: %s: close: %s\n", path,
				errname(errno));
	} else if (O.reread_after) {
		printf("not-opened\n");
		bad = 1;
	}
	free(buf);
	return bad;
}

int cmd_paths(void)
{
	char path[PATH_MAX];
	size_t skip = strlen(O.dir) + 1;

	for (uint64_t i = 0; i < O.blocks; i++) {
		vllm_path(path, sizeof(path), O.key_base + i);
		printf("%s\n", path + skip);
	}
	return 0;
}
