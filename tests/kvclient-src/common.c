/*
 * kvclient: what every command shares while it runs: the failure count and
 * its messages, the stop flag, errno names, per-thread seeds, the thread
 * pool over the keys, progress and ENOSPC lines, and the summary line.
 */
#include "kvclient.h"

#include <sys/vfs.h>

/* g_stop stays here: the other files see it through stopped() */
atomic_ullong g_failures;
static atomic_int g_stop;
atomic_int g_enospc_seen;
pthread_mutex_t g_out_mu = PTHREAD_MUTEX_INITIALIZER;

void failf(const char *path, long long off, const char *fmt, ...)
{
	unsigned long long n = atomic_fetch_add(&g_failures, 1);
	va_list ap;

	if (!O.keep_going)
		atomic_store(&g_stop, 1);
	if (n > MAX_SHOWN_FAILURES)
		return;
	pthread_mutex_lock(&g_out_mu);
	if (n == MAX_SHOWN_FAILURES) {
		fprintf(stderr, "kvclient %s: further failures not shown\n",
			O.cmd);
	} else {
		fprintf(stderr, "kvclient %s: FAIL %s: offset %lld: ", O.cmd,
			path, off);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	fflush(stderr);
	pthread_mutex_unlock(&g_out_mu);
}

void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "kvclient: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

int stopped(void)
{
	return atomic_load(&g_stop);
}

double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

uint64_t rng_next(uint64_t *s)
{
	*s += GOLDEN;
	return mix64(*s);
}

uint64_t thread_seed(int idx)
{
	uint64_t s = O.seed;

	if (!s) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
		    ((uint64_t)getpid() << 16);
	}
	return mix64(s + (uint64_t)idx * 0x632be59bd9b4e019ULL);
}

void progress_tick(struct counters *c)
{
	unsigned long long n = atomic_fetch_add(&c->stored, 1) + 1;

	if (O.progress && n % O.progress == 0) {
		pthread_mutex_lock(&g_out_mu);
		printf("progress %llu\n", n);
		fflush(stdout);
		pthread_mutex_unlock(&g_out_mu);
	}
}

/*
 * A store step failed with errno e.  With --stop-on-enospc an ENOSPC ends
 * the run: the name must not have appeared.  Returns 1 if handled as ENOSPC.
 */
int store_enospc(const char *dest, int e)
{
	if (!O.stop_on_enospc || e != ENOSPC)
		return 0;
	if (access(dest, F_OK) == 0)
		failf(dest, 0, "store failed with ENOSPC but the name exists");
	else if (errno != ENOENT)
		failf(dest, 0, "access after ENOSPC: %s (expected ENOENT)",
		      strerror(errno));
	if (atomic_fetch_add(&g_enospc_seen, 1) == 0) {
		pthread_mutex_lock(&g_out_mu);
		printf("enospc %s\n", dest);
		fflush(stdout);
		pthread_mutex_unlock(&g_out_mu);
	}
	atomic_store(&g_stop, 1);
	return 1;
}

/*
 * --crash-ok: the daemon may be killed during the run.  A call that fails
 * with ENOTCONN (the connection is gone) or ECONNABORTED (it was in flight
 * when it went) ends the run on every thread, prints "gone <ERRNO>" once
 * and is not a failure.  So does EIO when the mount is gone by then: the
 * kernel answers EIO for a direct write that went to the daemon in several
 * requests and lost some of them with the connection.  Returns 1 if e was
 * taken so.
 */
int mount_gone(int e)
{
	struct statfs sf;

	if (!O.crash_ok)
		return 0;
	/* statfs: the kernel asks the daemon every time (a stat may be
	 * answered from its cache, dead connection or not). */
	if (e == EIO && (statfs(O.dir, &sf) == 0 || (errno != ENOTCONN && errno != ECONNABORTED)))
		return 0;
	if (e != ENOTCONN && e != ECONNABORTED && e != EIO)
		return 0;
	if (atomic_exchange(&g_stop, 1) == 0) {
		pthread_mutex_lock(&g_out_mu);
		printf("gone %s\n", errname(e));
		fflush(stdout);
		pthread_mutex_unlock(&g_out_mu);
	}
	return 1;
}

/* A store step failed with errno e: 1 if that ends the run without being a
 * failure (the mount is gone, or ENOSPC with --stop-on-enospc). */
int store_stops(const char *dest, int e)
{
	return mount_gone(e) || store_enospc(dest, e);
}

const char *errname(int e)
{
	switch (e) {
	case ENOENT: return "ENOENT";
	case EIO: return "EIO";
	case ENOSPC: return "ENOSPC";
	case EINVAL: return "EINVAL";
	case ENOTCONN: return "ENOTCONN";
	case EEXIST: return "EEXIST";
	case EACCES: return "EACCES";
	case EROFS: return "EROFS";
	case ESTALE: return "ESTALE";
	case EBUSY: return "EBUSY";
	case EPERM: return "EPERM";
	case EBADF: return "EBADF";
	case EFAULT: return "EFAULT";
	case ENXIO: return "ENXIO";
	case ENODATA: return "ENODATA";
	case ENOTDIR: return "ENOTDIR";
	case EISDIR: return "EISDIR";
	case EOVERFLOW: return "EOVERFLOW";
	case EAGAIN: return "EAGAIN";
	case EINTR: return "EINTR";
	case ENOMEM: return "ENOMEM";
	case ENODEV: return "ENODEV";
	case ECONNABORTED: return "ECONNABORTED";
	default: return strerror(e);
	}
}

/* ------------------------------------------------------------------ */
/* thread pool                                                        */

atomic_ullong g_next;

/* Next key index to work on, or -1 when done. */
long long next_index(void)
{
	unsigned long long i;

	if (stopped())
		return -1;
	i = atomic_fetch_add(&g_next, 1);
	return i < O.blocks ? (long long)i : -1;
}

void run_threads(int n, void *(*fn)(void *), struct counters *c)
{
	struct worker *w = calloc((size_t)n, sizeof(*w));
	int i;

	if (!w)
		die("out of memory");
	atomic_store(&g_next, 0);
	for (i = 0; i < n; i++) {
		w[i].idx = i;
		w[i].c = c;
		w[i].fn = fn;
		if (pthread_create(&w[i].tid, NULL, fn, &w[i]))
			die("pthread_create failed");
	}
	for (i = 0; i < n; i++)
		pthread_join(w[i].tid, NULL);
	free(w);
}

void summary(const char *phase, struct counters *c, double t0,
	     const char *extra)
{
	double secs = now_sec() - t0;
	unsigned long long bytes = atomic_load(&c->bytes);

	printf("%s %s: ops=%llu bytes=%llu errors=%llu%s%s secs=%.2f MiB/s=%.1f\n",
	       O.cmd, phase, atomic_load(&c->ops), bytes,
	       atomic_load(&g_failures), extra && *extra ? " " : "",
	       extra ? extra : "", secs,
	       secs > 0 ? (double)bytes / 1048576.0 / secs : 0.0);
	fflush(stdout);
}
