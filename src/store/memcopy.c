/* Verified copies: memory files that hold the bytes an open hashed, so
 * that reads are served from what was checked; kept in a pool by size,
 * within a budget, and given back to the system once idle (memcopy.h). */
#include "memcopy.h"

#include <fcntl.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"

/* Sizes are rounded up to this, so that blocks of one size share copies. */
#define UNIT ((uint64_t)1 << 20)
/* The log says at most this often that opens went without a copy. */
#define WARN_EVERY_US (10 * G_USEC_PER_SEC)

struct kvt_copies {
	GMutex lock;
	GCond room;      /* a copy was given back or freed */
	GCond pooled_or_end; /* wakes the trimmer */
	uint64_t budget;
	uint64_t held;   /* bytes of copies in use and pooled */
	uint64_t pooled; /* bytes of copies in the pool */
	gint64 wait_us, idle_us;
	guint waiters, max_waiters; /* opens waiting for room */
	GHashTable *user_waiters; /* uid -> its opens waiting */
	guint max_user_waiters;
	GQueue pool;     /* struct kvt_copy, the last put first */
	struct kvt_stats *stats;
	GThread *trimmer;
	bool ending;
	struct kvt_log_every without; /* the log's line on opens without a copy */
	struct kvt_log_every user_full; /* ... on a uid's waits past its share */
};

static void copy_free(struct kvt_copy *cp)
{
	munmap(cp->map, cp->size);
	close(cp->fd);
	g_free(cp);
}

/* Frees the pooled copies idle for idle_us, the oldest (the pool's
 * tail) first: a server that stopped loading gives its memory back. */
static gpointer trim(gpointer data)
{
	struct kvt_copies *c = data;

	g_mutex_lock(&c->lock);
	while (!c->ending) {
		struct kvt_copy *old = g_queue_peek_tail(&c->pool);
		gint64 due;

		if (!old) {
			g_cond_wait(&c->pooled_or_end, &c->lock);
			continue;
		}
		due = old->idle_since + c->idle_us;
		if (g_get_monotonic_time() < due) {
			g_cond_wait_until(&c->pooled_or_end, &c->lock, due);
			continue;
		}
		g_queue_pop_tail(&c->pool);
		c->pooled -= old->size;
		c->held -= old->size;
		g_cond_broadcast(&c->room);
		g_mutex_unlock(&c->lock);
		copy_free(old);
		g_mutex_lock(&c->lock);
	}
	g_mutex_unlock(&c->lock);
	return NULL;
}

struct kvt_copies *kvt_copies_new(uint64_t budget, gint64 wait_us, gint64 idle_us,
				  guint max_waiters, guint max_user_waiters,
				  struct kvt_stats *stats)
{
	struct kvt_copies *c = g_new0(struct kvt_copies, 1);

	g_mutex_init(&c->lock);
	g_cond_init(&c->room);
	g_cond_init(&c->pooled_or_end);
	c->budget = budget;
	c->wait_us = wait_us;
	c->idle_us = idle_us;
	c->max_waiters = max_waiters;
	c->max_user_waiters = MAX(1, max_user_waiters);
	c->user_waiters = g_hash_table_new(NULL, NULL);
	c->stats = stats;
	c->trimmer = g_thread_new("kvt-copies", trim, c);
	return c;
}

void kvt_copies_free(struct kvt_copies *c)
{
	if (!c)
		return;
	g_mutex_lock(&c->lock);
	c->ending = true;
	g_cond_signal(&c->pooled_or_end);
	g_mutex_unlock(&c->lock);
	g_thread_join(c->trimmer);
	g_queue_clear_full(&c->pool, (GDestroyNotify)copy_free);
	g_hash_table_unref(c->user_waiters);
	g_cond_clear(&c->room);
	g_cond_clear(&c->pooled_or_end);
	g_mutex_clear(&c->lock);
	g_free(c);
}

/* A new memory file of @size bytes, its pages allocated (so that filling
 * it through the mapping cannot fault for want of memory). */
static struct kvt_copy *copy_new(uint64_t size)
{
	struct kvt_copy *cp = g_new0(struct kvt_copy, 1);

	cp->size = size;
	cp->fd = memfd_create("kvtierfs-verified", MFD_CLOEXEC);
	if (cp->fd >= 0 && fallocate(cp->fd, 0, 0, (off_t)size) == 0) {
		cp->map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, cp->fd, 0);
		if (cp->map != MAP_FAILED)
			return cp;
	}
	if (cp->fd >= 0)
		close(cp->fd);
	g_free(cp);
	return NULL;
}

/* Takes a pooled copy of @want bytes, or room for a new one, freeing the
 * oldest pooled copies of other sizes into @drop for it.  Caller holds
 * c->lock.  Returns the copy, or NULL with *room set when there is room. */
static struct kvt_copy *take(struct kvt_copies *c, uint64_t want, GPtrArray *drop, bool *room)
{
	for (GList *l = c->pool.head; l; l = l->next) {
		struct kvt_copy *cp = l->data;

		if (cp->size == want) {
			g_queue_delete_link(&c->pool, l);
			c->pooled -= want;
			return cp;
		}
	}
	while (c->held + want > c->budget && c->pool.length) {
		struct kvt_copy *old = g_queue_pop_tail(&c->pool);

		c->pooled -= old->size;
		c->held -= old->size;
		g_ptr_array_add(drop, old);
	}
	*room = c->held + want <= c->budget;
	if (*room)
		c->held += want;
	return NULL;
}

/* Counts an open that goes without a copy, and says so now and then. */
static void went_without(struct kvt_copies *c, uint64_t want)
{
	guint64 more = 0;
	bool say;

	if (c->stats)
		kvt_stat_add(c->stats, KVT_STAT_uncopied, 1);
	g_mutex_lock(&c->lock);
	say = kvt_log_due(&c->without, WARN_EVERY_US, &more);
	g_mutex_unlock(&c->lock);
	if (say)
		g_warning("no memory for a verified copy of %" G_GUINT64_FORMAT
			  " MiB (budget %" G_GUINT64_FORMAT " MiB, waited %.1f s at most): an "
			  "open reads from the lower file after its hash, and a change there "
			  "meanwhile would reach it (%" G_GUINT64_FORMAT " more since the last line)",
			  want / UNIT, c->budget / UNIT, (double)c->wait_us / G_USEC_PER_SEC, more);
}

/* Whether @uid may have one more open waiting, counted if so (caller
 * holds c->lock); if not, *@say whether the log's line on it is due, with
 * the refusals since the last in *@more. */
static bool user_may_wait(struct kvt_copies *c, uid_t uid, bool *say, guint64 *more)
{
	gpointer key = GUINT_TO_POINTER(uid);
	guint n = GPOINTER_TO_UINT(g_hash_table_lookup(c->user_waiters, key));

	if (n >= c->max_user_waiters) {
		*say = kvt_log_due(&c->user_full, WARN_EVERY_US, more);
		return false;
	}
	g_hash_table_insert(c->user_waiters, key, GUINT_TO_POINTER(n + 1));
	return true;
}

static void user_waited(struct kvt_copies *c, uid_t uid)
{
	gpointer key = GUINT_TO_POINTER(uid);
	guint n = GPOINTER_TO_UINT(g_hash_table_lookup(c->user_waiters, key));

	if (n > 1)
		g_hash_table_insert(c->user_waiters, key, GUINT_TO_POINTER(n - 1));
	else
		g_hash_table_remove(c->user_waiters, key);
}

struct kvt_copy *kvt_copy_get(struct kvt_copies *c, uint64_t size, uid_t uid)
{
	g_autoptr(GPtrArray) drop = g_ptr_array_new_with_free_func((GDestroyNotify)copy_free);
	struct kvt_copy *cp = NULL;
	bool room = false, say = false;
	guint64 more = 0;
	uint64_t want;

	if (!c || size == 0)
		return NULL;
	if (size > c->budget) {
		went_without(c, size);
		return NULL;
	}
	want = (size + UNIT - 1) / UNIT * UNIT;
	g_mutex_lock(&c->lock);
	/* Copies in use hold the budget: one is given back within a load,
	 * by its release, which needs a thread of the caller's that is not
	 * waiting here. */
	cp = take(c, want, drop, &room);
	if (!cp && !room && c->waiters < c->max_waiters && user_may_wait(c, uid, &say, &more)) {
		/* Counted as it starts: the count shows a wait going on. */
		gint64 deadline = g_get_monotonic_time() + c->wait_us;

		if (c->stats)
			kvt_stat_add(c->stats, KVT_STAT_copy_waits, 1);
		c->waiters++;
		while (!(cp = take(c, want, drop, &room)) && !room &&
		       g_cond_wait_until(&c->room, &c->lock, deadline))
			;
		if (!cp && !room)
			cp = take(c, want, drop, &room); /* given back as the wait ended */
		c->waiters--;
		user_waited(c, uid);
	}
	g_mutex_unlock(&c->lock);
	if (say)
		g_warning("uid %u has %u opens waiting for copy memory, its share of the %u that "
			  "may wait: its next ones go without (%" G_GUINT64_FORMAT " more since the "
			  "last line)", (unsigned)uid, c->max_user_waiters, c->max_waiters, more);
	if (cp)
		return cp;
	if (room) {
		cp = copy_new(want);
		if (cp)
			return cp;
		g_mutex_lock(&c->lock);
		c->held -= want;
		g_cond_broadcast(&c->room);
		g_mutex_unlock(&c->lock);
	}
	went_without(c, want);
	return NULL;
}

void kvt_copy_put(struct kvt_copies *c, struct kvt_copy *cp)
{
	bool keep;

	g_mutex_lock(&c->lock);
	/* A quarter of the budget stays ready; the rest goes back to the
	 * system once the loads that needed it are done. */
	keep = c->pooled + cp->size <= c->budget / 4;
	if (keep) {
		cp->idle_since = g_get_monotonic_time();
		g_queue_push_head(&c->pool, cp);
		c->pooled += cp->size;
		g_cond_signal(&c->pooled_or_end);
	} else {
		c->held -= cp->size;
	}
	/* A waiter takes this one, or makes room by freeing pooled ones. */
	g_cond_broadcast(&c->room);
	g_mutex_unlock(&c->lock);
	if (!keep)
		copy_free(cp);
}

void kvt_copies_held(struct kvt_copies *c, uint64_t *held, uint64_t *pooled)
{
	g_mutex_lock(&c->lock);
	*held = c->held;
	*pooled = c->pooled;
	g_mutex_unlock(&c->lock);
}
