/* Failures of the lower file system told from a name's answers, counted
 * (lower_errors) and logged at most one line per kind of call and errno
 * every 10 s (lowerr.h). */
#include "lowerr.h"

#include <errno.h>
#include <string.h>

#include "log.h"

#define LOG_EVERY_US (10 * G_USEC_PER_SEC)

static struct kvt_stats *counted;

/* The kinds of failure seen: a few, for the log's rate limit. */
static struct kind {
	const char *op;
	int err;
	struct kvt_log_every log;
} kinds[32];
static guint nkinds;
static GMutex kinds_lock;

void kvt_lower_errors_to(struct kvt_stats *stats)
{
	__atomic_store_n(&counted, stats, __ATOMIC_RELEASE);
}

bool kvt_lower_is_failure(int err)
{
	switch (err) {
	case ENOENT: case EEXIST: case ENOTEMPTY: case ENOTDIR: case EISDIR:
	case ELOOP: case ENXIO: case EXDEV: case EINVAL: case ENAMETOOLONG:
	case ENODATA: case ERANGE: case E2BIG: case EOPNOTSUPP: case EPERM:
	case EACCES: case EBADMSG: case EMLINK: case EFBIG:
		return false;
	default:
		return true;
	}
}

/* The kind of (@op, @err), made if new (the last slot takes every kind
 * beyond the table's size).  Caller holds kinds_lock. */
static struct kind *kind_of(const char *op, int err)
{
	for (guint i = 0; i < nkinds; i++)
		if (kinds[i].err == err && !strcmp(kinds[i].op, op))
			return &kinds[i];
	if (nkinds < G_N_ELEMENTS(kinds)) {
		kinds[nkinds] = (struct kind){ .op = op, .err = err };
		return &kinds[nkinds++];
	}
	return &kinds[G_N_ELEMENTS(kinds) - 1];
}

int kvt_lower_failed(const char *op, const char *name, int err)
{
	struct kvt_stats *stats = __atomic_load_n(&counted, __ATOMIC_ACQUIRE);
	guint64 more = 0;
	bool log;

	/* Before a mount is up (and in kvtierfs-fsck), a failure is the
	 * caller's to report: the one line that says why it stops. */
	if (!stats || !kvt_lower_is_failure(err))
		return -err;
	kvt_stat_add(stats, KVT_STAT_lower_errors, 1);
	g_mutex_lock(&kinds_lock);
	log = kvt_log_due(&kind_of(op, err)->log, LOG_EVERY_US, &more);
	g_mutex_unlock(&kinds_lock);
	if (!log)
		return -err;
	if (more)
		g_warning("lower file system: %s %s: %s (errno %d); %" G_GUINT64_FORMAT
			  " more such since the last line", op, name ? name : "", g_strerror(err),
			  err, more);
	else
		g_warning("lower file system: %s %s: %s (errno %d)", op, name ? name : "",
			  g_strerror(err), err);
	return -err;
}
