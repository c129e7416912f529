/* Bounds that fail the one caller, not the mount (bounds.h). */
#include "bounds.h"

#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "inode.h"
#include "options.h"
#include "stage.h"

/* Descriptors a stage holds: its bytes, O_DIRECT on them, its record. */
#define STAGE_FDS 3
/* What a vLLM tier needs at least (up to 32 writer threads), whatever the
 * descriptor limit says. */
#define MIN_PENDING 64
/* Memory an attribute costs beyond its name and value: the table's node,
 * the GBytes, the allocator's headers.  Counted so that a flood of empty
 * values is bounded too. */
#define XATTR_OVERHEAD 96
#define LOG_EVERY_US (10 * G_TIME_SPAN_SECOND)
#define MiB ((uint64_t)1 << 20)

void kvt_bounds_init(struct kvt_bounds *b, const struct kvt_options *o, uint64_t lower_bytes)
{
	struct rlimit rl;
	uint64_t fds = 1024;

	memset(b, 0, sizeof(*b));
	g_mutex_init(&b->lock);
	b->pending = g_hash_table_new(NULL, NULL);
	b->xattr_users = g_hash_table_new_full(NULL, NULL, NULL, g_free);
	b->staged = g_hash_table_new_full(NULL, NULL, NULL, g_free);
	b->waiting = g_hash_table_new(NULL, NULL);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		fds = rl.rlim_cur;
	fds = MIN(fds, (uint64_t)1 << 30);
	/* Stages take half of the descriptors at most, the rest being the
	 * daemon's own (lower directories, a pipe and a ring per thread) and
	 * the readers'; one uid a quarter. */
	b->max_pending_total = MAX(MIN_PENDING, fds / 2 / STAGE_FDS);
	if (o->max_pending > 0)
		b->max_pending = (guint)o->max_pending;
	else
		b->max_pending = MAX(MIN_PENDING, fds / 4 / STAGE_FDS);
	b->max_pending_total = MAX(b->max_pending_total, b->max_pending);
	b->max_xattr_size = (uint64_t)o->max_xattr_size;
	b->max_xattr_memory = (uint64_t)o->xattr_memory << 20;
	/* A quarter of the lower disk per uid, like the other bounds per
	 * uid: four users fill it only together, and a vLLM tier stages a
	 * few blocks per writer thread at a time.  Unknown: no bound. */
	if (o->max_staged > 0)
		b->max_staged = (uint64_t)o->max_staged * MiB;
	else
		b->max_staged = lower_bytes ? MAX(lower_bytes / 4, MiB) : UINT64_MAX;
	/* An eighth of the threads: the releases and stores of everyone
	 * else need the rest. */
	b->max_waiting = MAX(1, o->max_threads / 8);
}

void kvt_bounds_fini(struct kvt_bounds *b)
{
	g_hash_table_unref(b->pending);
	g_hash_table_unref(b->xattr_users);
	g_hash_table_unref(b->staged);
	g_hash_table_unref(b->waiting);
	g_mutex_clear(&b->lock);
}

char *kvt_bounds_describe(const struct kvt_bounds *b)
{
	g_autofree char *staged = b->max_staged == UINT64_MAX ? g_strdup("none") :
		g_strdup_printf("%" G_GUINT64_FORMAT " MiB", b->max_staged / MiB);

	return g_strdup_printf("max_pending=%u per uid, %u in all; max_xattr_size=%" G_GUINT64_FORMAT
			       ", xattr_memory=%" G_GUINT64_FORMAT " MiB; max_staged=%s per uid; "
			       "%u threads waiting for readers per uid",
			       b->max_pending, b->max_pending_total, b->max_xattr_size,
			       b->max_xattr_memory >> 20, staged, b->max_waiting);
}

/* What a stage is counted against, given back with its last reference
 * (its bytes at its publication, if sooner). */
struct pending_charge {
	struct kvt_bounds *b;
	uid_t uid;
	uint64_t staged;	/* bytes charged to uid (under b->lock) */
	bool published;		/* its bytes are an object (under b->lock) */
};

static void stage_gone(void *data);

/* The charge of @st, or NULL if it was not begun here. */
static struct pending_charge *charge_of(struct kvt_stage *st)
{
	return st->gone == stage_gone ? st->gone_data : NULL;
}

/* Gives back what @c holds of its uid's staged bytes (caller holds
 * b->lock). */
static void give_staged(struct pending_charge *c)
{
	struct kvt_bounds *b = c->b;
	uint64_t *n;

	if (!c->staged)
		return;
	n = g_hash_table_lookup(b->staged, GUINT_TO_POINTER(c->uid));
	if (n) {
		*n -= MIN(*n, c->staged);
		if (!*n)
			g_hash_table_remove(b->staged, GUINT_TO_POINTER(c->uid));
	}
	c->staged = 0;
}

static void give_pending(struct kvt_bounds *b, uid_t uid)
{
	gpointer key = GUINT_TO_POINTER(uid);
	guint n;

	g_mutex_lock(&b->lock);
	n = GPOINTER_TO_UINT(g_hash_table_lookup(b->pending, key));
	if (n > 1)
		g_hash_table_insert(b->pending, key, GUINT_TO_POINTER(n - 1));
	else
		g_hash_table_remove(b->pending, key);
	b->pending_total--;
	g_mutex_unlock(&b->lock);
}

static void stage_gone(void *data)
{
	struct pending_charge *c = data;

	g_mutex_lock(&c->b->lock);
	give_staged(c);
	g_mutex_unlock(&c->b->lock);
	give_pending(c->b, c->uid);
	g_free(c);
}

static int take_pending(struct kvt_bounds *b, uid_t uid)
{
	gpointer key = GUINT_TO_POINTER(uid);
	guint n, total;
	guint64 more;
	int ret = 0;

	g_mutex_lock(&b->lock);
	n = GPOINTER_TO_UINT(g_hash_table_lookup(b->pending, key));
	total = b->pending_total;
	if (n >= b->max_pending) {
		ret = -EDQUOT;
		if (kvt_log_due(&b->pending_log, LOG_EVERY_US, &more))
			g_warning("uid %u holds %u files being written (-o max_pending=%u): "
				  "a new one is refused with EDQUOT (%" G_GUINT64_FORMAT
				  " more refusals since the last line)",
				  (unsigned)uid, n, b->max_pending, more);
	} else if (total >= b->max_pending_total) {
		ret = -ENFILE;
		if (kvt_log_due(&b->total_log, LOG_EVERY_US, &more))
			g_warning("%u files being written in all, the most the descriptor limit "
				  "allows: uid %u's new one is refused with ENFILE (%" G_GUINT64_FORMAT
				  " more refusals since the last line)",
				  total, (unsigned)uid, more);
	} else {
		g_hash_table_insert(b->pending, key, GUINT_TO_POINTER(n + 1));
		b->pending_total++;
	}
	g_mutex_unlock(&b->lock);
	return ret;
}

int kvt_bounds_stage_new(struct kvt_fs *fs, uid_t uid, struct kvt_stage **out)
{
	struct kvt_bounds *b = &fs->bounds;
	struct pending_charge *c;
	int ret = take_pending(b, uid);

	if (ret < 0)
		return ret;
	ret = kvt_stage_new(fs->store, out);
	if (ret < 0) {
		give_pending(b, uid);
		return ret;
	}
	c = g_new0(struct pending_charge, 1);
	c->b = b;
	c->uid = uid;
	(*out)->gone = stage_gone;
	(*out)->gone_data = c;
	return 0;
}

int kvt_bounds_stage_grow(struct kvt_fs *fs, struct kvt_stage *st, uint64_t end)
{
	struct kvt_bounds *b = &fs->bounds;
	struct pending_charge *c = charge_of(st);
	uint64_t *n, more;
	guint64 said;
	int ret = 0;

	if (!c)
		return 0;
	g_mutex_lock(&b->lock);
	if (c->published || end <= c->staged) {
		g_mutex_unlock(&b->lock);
		return 0;
	}
	more = end - c->staged;
	n = g_hash_table_lookup(b->staged, GUINT_TO_POINTER(c->uid));
	if (!n) {
		n = g_new0(uint64_t, 1);
		g_hash_table_insert(b->staged, GUINT_TO_POINTER(c->uid), n);
	}
	if (more > b->max_staged || *n > b->max_staged - more) {
		ret = -EDQUOT;
		if (kvt_log_due(&b->staged_log, LOG_EVERY_US, &said))
			g_warning("uid %u's files being written hold %" G_GUINT64_FORMAT
				  " MiB of the lower disk, and one would grow to %" G_GUINT64_FORMAT
				  " MiB (-o max_staged=%" G_GUINT64_FORMAT " MiB): EDQUOT (%"
				  G_GUINT64_FORMAT " more refusals since the last line)",
				  (unsigned)c->uid, *n / MiB, end / MiB, b->max_staged / MiB, said);
		if (!*n)
			g_hash_table_remove(b->staged, GUINT_TO_POINTER(c->uid));
	} else {
		*n += more;
		c->staged = end;
	}
	g_mutex_unlock(&b->lock);
	return ret;
}

void kvt_bounds_stage_published(struct kvt_fs *fs, struct kvt_stage *st)
{
	struct pending_charge *c = charge_of(st);

	if (!c)
		return;
	g_mutex_lock(&fs->bounds.lock);
	give_staged(c);
	c->published = true;
	g_mutex_unlock(&fs->bounds.lock);
}

bool kvt_bounds_wait_begin(struct kvt_fs *fs, uid_t uid, const char *what)
{
	struct kvt_bounds *b = &fs->bounds;
	gpointer key = GUINT_TO_POINTER(uid);
	guint n;
	guint64 more;
	bool may;

	g_mutex_lock(&b->lock);
	n = GPOINTER_TO_UINT(g_hash_table_lookup(b->waiting, key));
	may = n < b->max_waiting;
	if (may)
		g_hash_table_insert(b->waiting, key, GUINT_TO_POINTER(n + 1));
	else if (kvt_log_due(&b->wait_log, LOG_EVERY_US, &more))
		g_warning("uid %u has %u threads waiting, an eighth of -o max_threads: %s "
			  "does not wait (%" G_GUINT64_FORMAT " more since the last line)",
			  (unsigned)uid, n, what, more);
	g_mutex_unlock(&b->lock);
	return may;
}

void kvt_bounds_wait_end(struct kvt_fs *fs, uid_t uid)
{
	struct kvt_bounds *b = &fs->bounds;
	gpointer key = GUINT_TO_POINTER(uid);
	guint n;

	g_mutex_lock(&b->lock);
	n = GPOINTER_TO_UINT(g_hash_table_lookup(b->waiting, key));
	if (n > 1)
		g_hash_table_insert(b->waiting, key, GUINT_TO_POINTER(n - 1));
	else
		g_hash_table_remove(b->waiting, key);
	g_mutex_unlock(&b->lock);
}

uint64_t kvt_xattrs_size(GHashTable *xattrs)
{
	GHashTableIter it;
	gpointer k, v;
	uint64_t n = 0;

	if (!xattrs)
		return 0;
	g_hash_table_iter_init(&it, xattrs);
	while (g_hash_table_iter_next(&it, &k, &v))
		n += strlen(k) + g_bytes_get_size(v);
	return n;
}

/* The memory @size bytes of names and values in @count attributes take. */
static uint64_t xattr_memory(uint64_t size, guint count)
{
	return size + (uint64_t)count * XATTR_OVERHEAD;
}

/* Whether @ino's xattrs exist in memory only: no record holds them. */
static bool memory_only(const struct kvt_inode *ino)
{
	return !ino->has_record || __atomic_load_n(&ino->unlinked, __ATOMIC_RELAXED);
}

static uint64_t *user_bytes(struct kvt_bounds *b, uid_t uid)
{
	uint64_t *n = g_hash_table_lookup(b->xattr_users, GUINT_TO_POINTER(uid));

	if (!n) {
		n = g_new0(uint64_t, 1);
		g_hash_table_insert(b->xattr_users, GUINT_TO_POINTER(uid), n);
	}
	return n;
}

static void user_forget_if_none(struct kvt_bounds *b, uid_t uid)
{
	uint64_t *n = g_hash_table_lookup(b->xattr_users, GUINT_TO_POINTER(uid));

	if (n && !*n)
		g_hash_table_remove(b->xattr_users, GUINT_TO_POINTER(uid));
}

/* Charges @want bytes of @ino's to @uid instead of what it held.  With
 * @may_fail, a charge that grows is refused past @uid's share (-EDQUOT)
 * or the mount's bound (-ENOSPC), nothing changed.  Caller holds
 * ino->lock. */
static int charge(struct kvt_bounds *b, struct kvt_inode *ino, uid_t uid, uint64_t want,
		  bool may_fail)
{
	uint64_t held = ino->xattr_held, *old, *user;
	int ret = 0;

	g_mutex_lock(&b->lock);
	old = user_bytes(b, ino->xattr_uid);
	*old -= held;
	b->xattr_memory -= held;
	user = user_bytes(b, uid);
	if (may_fail && want > held && *user + want > b->max_xattr_memory / 4)
		ret = -EDQUOT;
	else if (may_fail && want > held && b->xattr_memory + want > b->max_xattr_memory)
		ret = -ENOSPC;
	if (ret < 0) {
		*old += held;
		b->xattr_memory += held;
		user_forget_if_none(b, uid);
	} else {
		*user += want;
		b->xattr_memory += want;
		user_forget_if_none(b, ino->xattr_uid);
		ino->xattr_uid = uid;
		ino->xattr_held = want;
	}
	g_mutex_unlock(&b->lock);
	return ret;
}

/* Whether a refusal's line is due (one every LOG_EVERY_US), with *@more
 * the refusals not said since the last. */
static bool refusal_due(struct kvt_bounds *b, struct kvt_log_every *e, guint64 *more)
{
	bool due;

	g_mutex_lock(&b->lock);
	due = kvt_log_due(e, LOG_EVERY_US, more);
	g_mutex_unlock(&b->lock);
	return due;
}

int kvt_bounds_xattr_room(struct kvt_fs *fs, struct kvt_inode *ino, uid_t uid,
			  const char *name, size_t size)
{
	struct kvt_bounds *b = &fs->bounds;
	GBytes *old = ino->rec.xattrs ? g_hash_table_lookup(ino->rec.xattrs, name) : NULL;
	uint64_t now = kvt_xattrs_size(ino->rec.xattrs);
	uint64_t after = now + size + (old ? 0 : strlen(name)) - (old ? g_bytes_get_size(old) : 0);
	guint count = (ino->rec.xattrs ? g_hash_table_size(ino->rec.xattrs) : 0) + !old;
	guint64 more;
	int ret;

	/* A file over the bound (a record written with a larger one) may
	 * still shrink. */
	if (after > b->max_xattr_size && after > now) {
		if (refusal_due(b, &b->size_log, &more))
			g_warning("file %" G_GUINT64_FORMAT ": its xattrs would take %" G_GUINT64_FORMAT
				  " bytes of names and values, over -o max_xattr_size=%" G_GUINT64_FORMAT
				  ": E2BIG (%" G_GUINT64_FORMAT " more refusals since the last line)",
				  ino->st_ino, after, b->max_xattr_size, more);
		return -E2BIG;
	}
	if (!memory_only(ino))
		return 0;
	ret = charge(b, ino, uid, MAX(xattr_memory(after, count), ino->xattr_held), true);
	if (ret == -EDQUOT && refusal_due(b, &b->memory_log, &more))
		g_warning("uid %u: the xattrs of its files without a record would take more than "
			  "a quarter of -o xattr_memory=%" G_GUINT64_FORMAT " MiB: EDQUOT (%"
			  G_GUINT64_FORMAT " more refusals since the last line)",
			  (unsigned)uid, b->max_xattr_memory >> 20, more);
	else if (ret == -ENOSPC && refusal_due(b, &b->memory_log, &more))
		g_warning("uid %u: the xattrs of files without a record would take more than "
			  "-o xattr_memory=%" G_GUINT64_FORMAT " MiB in all: ENOSPC (%"
			  G_GUINT64_FORMAT " more refusals since the last line)",
			  (unsigned)uid, b->max_xattr_memory >> 20, more);
	return ret;
}

void kvt_bounds_xattr_settle(struct kvt_fs *fs, struct kvt_inode *ino)
{
	GHashTable *x = ino->rec.xattrs;
	guint count = x ? g_hash_table_size(x) : 0;

	if (!ino->xattr_held && (!count || !memory_only(ino)))
		return;
	charge(&fs->bounds, ino, ino->xattr_uid, memory_only(ino) && count ?
	       xattr_memory(kvt_xattrs_size(x), count) : 0, false);
}

void kvt_bounds_xattr_drop(struct kvt_fs *fs, struct kvt_inode *ino)
{
	if (ino->xattr_held)
		charge(&fs->bounds, ino, ino->xattr_uid, 0, false);
}
