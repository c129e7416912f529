/* The tier's usage and its budget (usage.h). */
#include "usage.h"

#include <errno.h>
#include <stdio.h>
#include <sys/statvfs.h>

#include "evictor.h"
#include "ledger.h"
#include "log.h"
#include "lower.h"
#include "store-int.h"

#define LOG_EVERY_US (10 * G_USEC_PER_SEC)
/* How long a look at the lower file system's free space is used. */
#define STATVFS_AGE_US G_USEC_PER_SEC
/* How often the other mounts' moves are looked at (ledger.h). */
#define LEDGER_TICK_US G_USEC_PER_SEC

struct kvt_usage {
	uint64_t max_bytes;
	unsigned min_free_pct;
	gint64 moves;       /* atomic: every move since the open */
	gint64 fan_moves[KVT_FANOUT]; /* atomic: the same, by fan-out directory */
	gint64 base;        /* atomic: the last count, less the moves before it */
	gint64 others;      /* atomic: what other mounts moved since (ledger.h) */
	gint64 reserved;    /* atomic: room held for publications under locks */
	struct kvt_ledger *ledger; /* the thread's */
	gint known;         /* atomic: a count ended */
	gint dirty;         /* atomic: moves not in our ledger file yet */
	GThread *thread;
	GMutex lock;
	GCond cond;
	GCond counted;      /* with lock: the first count ended */
	bool stop;          /* under lock */
	/* under lock: */
	struct kvt_log_every room_log;
	/* the lower file system, as last looked at: */
	gint64 sv_at;
	uint64_t lower_total, lower_avail, lower_used;
};

/* Bytes of the distinct objects in objects/ into *@total, and into
 * *@early what moved in each fan-out directory between the count's start
 * and its look at that directory: those moves are in *@total and in the
 * moves both.  False on a stop. */
static bool count(struct kvt_store *s, struct kvt_usage *u, const gint64 *before,
		  uint64_t *total, gint64 *early)
{
	*total = 0;
	*early = 0;
	for (guint b = 0; b < KVT_FANOUT; b++) {
		g_autoptr(kvt_dir) fan = NULL;
		g_autoptr(GPtrArray) ents = NULL;
		g_autoptr(GHashTable) seen = NULL;
		char dir[3];
		bool stop;
		int ret;

		g_mutex_lock(&u->lock);
		stop = u->stop;
		g_mutex_unlock(&u->lock);
		if (stop)
			return false;
		*early += __atomic_load_n(&u->fan_moves[b], __ATOMIC_ACQUIRE) - before[b];
		g_snprintf(dir, sizeof(dir), "%02x", b);
		if (kvt_dir_open(s->layout.objects, dir, &fan) < 0)
			continue;
		ents = kvt_dir_list(fan, false, &ret);
		if (!ents)
			continue;
		seen = g_hash_table_new(NULL, NULL);
		for (guint i = 0; i < ents->len; i++) {
			const struct kvt_dirent *e = ents->pdata[i];
			struct stat st;

			/* Each object once: all its links are in one fan-out
			 * directory. */
			if (kvt_dir_stat(fan, e->name, &st) == 0 && S_ISREG(st.st_mode) &&
			    g_hash_table_add(seen, GSIZE_TO_POINTER((gsize)st.st_ino)))
				*total += (uint64_t)st.st_size;
		}
	}
	return true;
}

static gpointer run(gpointer data)
{
	struct kvt_store *s = data;
	struct kvt_usage *u = s->usage;

	for (;;) {
		gint64 before = __atomic_load_n(&u->moves, __ATOMIC_ACQUIRE);
		gint64 t0 = g_get_monotonic_time(), until, early, fan_before[KVT_FANOUT];
		uint64_t total;
		bool first = !g_atomic_int_get(&u->known);

		for (guint b = 0; b < KVT_FANOUT; b++)
			fan_before[b] = __atomic_load_n(&u->fan_moves[b], __ATOMIC_ACQUIRE);
		kvt_ledger_rebase(u->ledger);
		if (!count(s, u, fan_before, &total, &early))
			return NULL;
		/* A move while the count looked at its directory may be
		 * counted twice, or not at all: the next count puts it
		 * right. */
		__atomic_store_n(&u->base, (gint64)total - before - early, __ATOMIC_RELEASE);
		__atomic_store_n(&u->others, 0, __ATOMIC_RELEASE);
		g_mutex_lock(&u->lock);
		g_atomic_int_set(&u->known, 1);
		g_cond_broadcast(&u->counted);
		g_mutex_unlock(&u->lock);
		if (first)
			g_info("the store's objects hold %" G_GUINT64_FORMAT " bytes (counted in "
			       "%.1f s)", total, (double)(g_get_monotonic_time() - t0) / G_USEC_PER_SEC);
		until = g_get_monotonic_time() + KVT_USAGE_RECOUNT_S * G_USEC_PER_SEC;
		for (gint64 next_read = 0;;) {
			gint64 now;

			g_mutex_lock(&u->lock);
			while (!u->stop && !g_atomic_int_get(&u->dirty) &&
			       g_get_monotonic_time() < MIN(until, next_read))
				g_cond_wait_until(&u->cond, &u->lock, MIN(until, next_read));
			if (u->stop) {
				g_mutex_unlock(&u->lock);
				return NULL;
			}
			g_mutex_unlock(&u->lock);
			if (g_atomic_int_compare_and_exchange(&u->dirty, 1, 0))
				kvt_ledger_write(u->ledger,
						 __atomic_load_n(&u->moves, __ATOMIC_ACQUIRE));
			now = g_get_monotonic_time();
			if (now >= until)
				break;
			if (now >= next_read) {
				__atomic_store_n(&u->others, kvt_ledger_read(u->ledger),
						 __ATOMIC_RELEASE);
				next_read = now + LEDGER_TICK_US;
			}
		}
	}
}

void kvt_usage_start(struct kvt_store *s, uint64_t max_bytes, unsigned min_free_pct)
{
	struct kvt_usage *u;

	if (!max_bytes && !min_free_pct)
		return;
	u = g_new0(struct kvt_usage, 1);
	u->max_bytes = max_bytes;
	u->min_free_pct = min_free_pct;
	g_mutex_init(&u->lock);
	g_cond_init(&u->cond);
	g_cond_init(&u->counted);
	u->ledger = kvt_ledger_new(s);
	s->usage = u;
	u->thread = g_thread_new("kvt-usage", run, s);
}

void kvt_usage_stop(struct kvt_store *s)
{
	struct kvt_usage *u = s->usage;

	if (!u)
		return;
	g_mutex_lock(&u->lock);
	u->stop = true;
	g_cond_broadcast(&u->cond);
	g_cond_broadcast(&u->counted);
	g_mutex_unlock(&u->lock);
	g_thread_join(u->thread);
	kvt_ledger_free(u->ledger);
	g_mutex_clear(&u->lock);
	g_cond_clear(&u->cond);
	g_cond_clear(&u->counted);
	g_free(u);
	s->usage = NULL;
}

unsigned kvt_usage_fan_of(const char *name)
{
	int hi = g_ascii_xdigit_value(name[0]), lo = hi < 0 ? -1 : g_ascii_xdigit_value(name[1]);

	return hi < 0 || lo < 0 ? 0 : (unsigned)(hi * 16 + lo);
}

bool kvt_usage_get(struct kvt_store *s, uint64_t *bytes)
{
	struct kvt_usage *u = s->usage;
	gint64 v;

	if (!u || !g_atomic_int_get(&u->known))
		return false;
	v = __atomic_load_n(&u->base, __ATOMIC_ACQUIRE) +
	    __atomic_load_n(&u->moves, __ATOMIC_ACQUIRE) +
	    __atomic_load_n(&u->others, __ATOMIC_ACQUIRE);
	*bytes = v > 0 ? (uint64_t)v : 0;
	return true;
}

void kvt_usage_move(struct kvt_store *s, unsigned fan, int64_t bytes)
{
	struct kvt_usage *u = s->usage;

	if (!u)
		return;
	__atomic_add_fetch(&u->fan_moves[fan % KVT_FANOUT], bytes, __ATOMIC_ACQ_REL);
	__atomic_add_fetch(&u->moves, bytes, __ATOMIC_ACQ_REL);
	/* Into the ledger at once (ledger.h): the first move since the
	 * last write wakes the thread, the next ones ride along. */
	if (g_atomic_int_compare_and_exchange(&u->dirty, 0, 1)) {
		g_mutex_lock(&u->lock);
		g_cond_signal(&u->cond);
		g_mutex_unlock(&u->lock);
	}
}

/* The lower file system's size, free space and use into @u, looked at
 * again when @fresh or older than a second.  The look is made without
 * u->lock: on a network file system it is a round trip, and every
 * publication asks. */
static int lower_space(struct kvt_store *s, struct kvt_usage *u, bool fresh)
{
	struct statvfs sv;
	bool young;
	int ret;

	g_mutex_lock(&u->lock);
	young = !fresh && u->sv_at && g_get_monotonic_time() - u->sv_at < STATVFS_AGE_US;
	g_mutex_unlock(&u->lock);
	if (young)
		return 0;
	ret = kvt_dir_statvfs(s->layout.objects, &sv);
	if (ret < 0)
		return ret;
	g_mutex_lock(&u->lock);
	u->lower_total = (uint64_t)sv.f_blocks * sv.f_frsize;
	u->lower_avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	u->lower_used = (uint64_t)(sv.f_blocks - sv.f_bfree) * sv.f_frsize;
	u->sv_at = g_get_monotonic_time();
	g_mutex_unlock(&u->lock);
	return 0;
}

uint64_t kvt_usage_budget(struct kvt_store *s)
{
	struct kvt_usage *u = s->usage;
	uint64_t budget, used, keep;

	if (!u)
		return 0;
	budget = u->max_bytes ? u->max_bytes : UINT64_MAX;
	if (u->min_free_pct && lower_space(s, u, false) == 0 && kvt_usage_get(s, &used)) {
		/* What the objects hold, and what the lower file system may
		 * still give them. */
		g_mutex_lock(&u->lock);
		keep = u->lower_total / 100 * u->min_free_pct;
		budget = MIN(budget, used + (u->lower_avail > keep ? u->lower_avail - keep : 0));
		g_mutex_unlock(&u->lock);
	}
	return budget == UINT64_MAX ? 0 : budget;
}

/* What leaves no room for @size bytes more ("max_size", "min_free"), or
 * NULL; *@used gets the usage. */
static const char *no_room(struct kvt_store *s, uint64_t size, uint64_t *used_out)
{
	struct kvt_usage *u = s->usage;
	const char *why = NULL;
	uint64_t used = 0, keep;
	gint64 held = __atomic_load_n(&u->reserved, __ATOMIC_ACQUIRE);
	bool counted, space;

	/* Room another store holds is taken (kvt_usage_wait_room). */
	size += (uint64_t)MAX(held, 0);
	/* Fresh for each object: stores a second apart would overshoot. */
	space = u->min_free_pct ? lower_space(s, u, true) == 0 : false;
	counted = kvt_usage_get(s, &used);
	/* Not counted yet: the lower file system's use, which holds the
	 * objects, bounds it. */
	if (u->max_bytes && !counted && !space)
		space = lower_space(s, u, false) == 0;
	g_mutex_lock(&u->lock);
	if (u->min_free_pct && space) {
		keep = u->lower_total / 100 * u->min_free_pct;
		if (u->lower_avail < keep || u->lower_avail - keep < size)
			why = "min_free";
	}
	if (!why && u->max_bytes) {
		if (!counted)
			used = space ? u->lower_used : 0;
		if (used > u->max_bytes || u->max_bytes - used < size)
			why = "max_size";
	}
	g_mutex_unlock(&u->lock);
	*used_out = used;
	return why;
}

/* A store refused by the conservative bound (the first count not ended)
 * waits for the count, KVT_USAGE_FIRST_COUNT_WAIT_S at most; true when it
 * waited. */
static bool wait_counted(struct kvt_usage *u)
{
	gint64 until = g_get_monotonic_time() + KVT_USAGE_FIRST_COUNT_WAIT_S * G_USEC_PER_SEC;

	if (g_atomic_int_get(&u->known))
		return false;
	g_mutex_lock(&u->lock);
	while (!g_atomic_int_get(&u->known) && !u->stop &&
	       g_cond_wait_until(&u->counted, &u->lock, until))
		;
	g_mutex_unlock(&u->lock);
	return true;
}

/* A store that waited for the evictor since @t0 (0: did not wait). */
static void room_waited(struct kvt_store *s, gint64 t0)
{
	if (!t0)
		return;
	kvt_store_count(s, KVT_STAT_room_waits, 1);
	kvt_store_count(s, KVT_STAT_room_wait_us, (uint64_t)(g_get_monotonic_time() - t0));
}

/* Set while this thread publishes under its caller's locks; whether the
 * evictor, asked before them, found nothing to evict; and the room it
 * holds for that publication. */
static __thread bool room_nowait, room_exhausted;
static __thread uint64_t room_held;

bool kvt_usage_set_nowait(bool nowait)
{
	bool was = room_nowait;

	room_nowait = nowait;
	return was;
}

void kvt_usage_wait_room(struct kvt_store *s, uint64_t size)
{
	struct kvt_usage *u = s->usage;
	uint64_t used;

	kvt_usage_release_room(s);
	room_exhausted = false;
	if (!u)
		return;
	if (no_room(s, size, &used))
		wait_counted(u);
	for (gint64 t0 = g_get_monotonic_time(), until = t0 + 30 * G_USEC_PER_SEC, waited = 0;
	     g_get_monotonic_time() < until; waited = 1) {
		if (!no_room(s, size, &used)) {
			/* Held, so that no store takes it before the
			 * publication: with the others' holds and this one
			 * counted, is the budget still kept? */
			__atomic_add_fetch(&u->reserved, (gint64)size, __ATOMIC_ACQ_REL);
			if (!no_room(s, 0, &used)) {
				room_held = size;
				room_waited(s, waited ? t0 : 0);
				return;
			}
			__atomic_sub_fetch(&u->reserved, (gint64)size, __ATOMIC_ACQ_REL);
		}
		if (!kvt_evictor_make_room(s, size)) {
			room_exhausted = true;
			room_waited(s, t0);
			return;
		}
	}
}

void kvt_usage_release_room(struct kvt_store *s)
{
	if (room_held && s->usage)
		__atomic_sub_fetch(&s->usage->reserved, (gint64)room_held, __ATOMIC_ACQ_REL);
	room_held = 0;
}

int kvt_usage_room(struct kvt_store *s, uint64_t size)
{
	struct kvt_usage *u = s->usage;
	const char *why;
	uint64_t used;
	guint64 more;
	gint64 t0;

	if (!u)
		return 0;
	/* Room held for this publication: its own, taken.  It is counted
	 * twice until its holder lets it go, after the publication. */
	if (room_nowait && room_held >= size)
		return 0;
	why = no_room(s, size, &used);
	if (why && !room_nowait && wait_counted(u))
		why = no_room(s, size, &used);
	/* The evictor makes room while it can: passes until one finds
	 * nothing to evict (other stores may take the room a pass made
	 * before this one looks), for as long as a pass may take. */
	t0 = why && !room_nowait && s->evictor ? g_get_monotonic_time() : 0;
	for (gint64 until = t0 + 30 * G_USEC_PER_SEC;
	     why && t0 && g_get_monotonic_time() < until && kvt_evictor_make_room(s, size);)
		why = no_room(s, size, &used);
	room_waited(s, t0);
	if (!why)
		return 0;
	g_mutex_lock(&u->lock);
	if (kvt_log_due(&u->room_log, LOG_EVERY_US, &more))
		g_warning("no room for a new object of %" G_GUINT64_FORMAT " bytes: the "
			  "tier holds %" G_GUINT64_FORMAT " bytes, its budget (-o %s) leaves "
			  "none%s: ENOSPC, nothing published (%" G_GUINT64_FORMAT " more "
			  "refusals since the last line)", size, used, why,
			  !s->evictor ? "" :
			  room_nowait && !room_exhausted ?
				" (a store made under its directory's locks, which "
					"an eviction may need: room was made before them, and "
					"taken since)" :
					" and nothing can be evicted",
			  more);
	g_mutex_unlock(&u->lock);
	return -ENOSPC;
}
