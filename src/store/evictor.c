/* The evictor (evictor.h). */
#include "evictor.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>
#include <xxh_x86dispatch.h>

#include "layout.h"
#include "log.h"
#include "lower.h"
#include "name.h"
#include "peerpins.h"
#include "store.h"
#include "store-int.h"
#include "usage.h"

/* How long a store waits for a pass to make room before ENOSPC. */
#define ROOM_WAIT_US (5 * G_USEC_PER_SEC)
#define ROOM_WAIT_MAX_US (30 * G_USEC_PER_SEC)
/* How often the thread looks at the usage when nothing wakes it. */
#define TICK_US (G_USEC_PER_SEC / 4)
/* Names evicted at once: an eviction is a dozen lower calls that wait
 * on the disk (a rename, three unlinks, opens and stats); one at a time
 * the stores of a busy server outran them. */
#define EVICT_THREADS 8

/* A block's name: the key first, so that the table is a set of these. */
struct block {
	uint64_t key;
	uint64_t size;
	gint64 used_at;          /* its last use known here, unix microseconds */
	char path[];
};

/* What the walk found of one record. */
struct found {
	struct timespec atime;
	uint64_t key, size;
	char *path;
};

struct kvt_evictor {
	struct kvt_store *s;
	struct kvt_evictor_opts o;
	GThread *thread;
	GMutex lock;
	GCond wake;              /* the thread: a waiter, a stop */
	GCond passed;            /* waiters: a pass ended */
	GThreadPool *workers;    /* evict_job */
	struct kvt_peerpins *peers; /* the thread's; read-only to the workers */
	/* under lock: */
	struct kvt_evict *order;
	GHashTable *blocks;      /* struct block, by key */
	GHashTable *pins;        /* key (uint64_t *) -> opens, held or not */
	bool pins_changed;       /* since they were last written (peerpins.h) */
	bool stop, indexed, exhausted;
	bool passing;            /* a pass is evicting */
	bool poked;              /* a store took the usage past evict_high */
	guint64 freed;           /* blocks evicted, ever: room for a waiter */
	guint64 asked;           /* stores that waited for room, ever */
	uint64_t wanted;         /* the most room one asked for since the
				  * thread last looked */
	guint64 passes;          /* passes made for stores that wait */
	gint64 walked_at;        /* the thread's own, with: */
	gint64 walk_us;          /* what the last walk took */
	struct kvt_lead lead;    /* the thread's own; and under lock, for
				  * make_room: */
	bool others_lead;        /* another mount makes the passes */
	bool leads;              /* this one does */
	struct kvt_log_every futile_log; /* the thread's own */
};

static struct block *block_new(uint64_t key, uint64_t size, gint64 used_at, const char *path)
{
	size_t len = strlen(path) + 1;
	struct block *b = g_malloc(sizeof(*b) + len);

	b->key = key;
	b->size = size;
	b->used_at = used_at;
	memcpy(b->path, path, len);
	return b;
}

/* What the policy's ghosts know a block by: its path, which a block
 * stored again after its eviction has again, in a record of another
 * inode. */
static uint64_t name_of(const char *path)
{
	return (uint64_t)XXH3_64bits_dispatch(path, strlen(path));
}

/* Caller holds ev->lock.  A block new to the index takes the pins its
 * key has (an open that came before the walk found it). */
static void held(struct kvt_evictor *ev, struct block *b, bool use)
{
	struct block *old = g_hash_table_lookup(ev->blocks, &b->key);
	guint pins = GPOINTER_TO_UINT(g_hash_table_lookup(ev->pins, &b->key));

	if (old && !use) {
		g_free(b);
		return;
	}
	g_hash_table_replace(ev->blocks, b, b);
	if (kvt_evict_insert_as(ev->order, b->key, name_of(b->path), b->size))
		for (guint i = 0; i < pins; i++)
			kvt_evict_pin(ev->order, b->key);
	ev->exhausted = false;
}

/* ------------------------------------------------------------ the walk */

static bool stopping(struct kvt_evictor *ev)
{
	bool stop;

	g_mutex_lock(&ev->lock);
	stop = ev->stop;
	g_mutex_unlock(&ev->lock);
	return stop;
}

/* The records below @d (whose path below names/ is @prefix) into @out;
 * false on a stop. */
static bool walk(struct kvt_evictor *ev, struct kvt_dir *d, const char *prefix, GArray *out)
{
	g_autoptr(GPtrArray) ents = NULL;
	int ret;

	ents = kvt_dir_list(d, false, &ret);
	if (!ents)
		return true;
	for (guint i = 0; i < ents->len; i++) {
		const struct kvt_dirent *e = ents->pdata[i];
		g_autofree char *path = prefix[0] ? g_strdup_printf("%s/%s", prefix, e->name) :
						    g_strdup(e->name);
		struct kvt_record rec;
		struct stat st;

		if (i % 256 == 0 && stopping(ev))
			return false;
		if (kvt_dir_stat(d, e->name, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			g_autoptr(kvt_dir) sub = NULL;

			if (kvt_dir_open(d, e->name, &sub) == 0 && !walk(ev, sub, path, out))
				return false;
			continue;
		}
		if (!S_ISREG(st.st_mode) || kvt_name_peek(d, e->name, &rec) < 0)
			continue;
		if (rec.kind == KVT_KIND_FILE && rec.ref[0]) {
			struct found f = {
				.atime = st.st_atim, .key = st.st_ino, .size = rec.size,
				.path = g_steal_pointer(&path),
			};

			g_array_append_val(out, f);
		}
		kvt_record_clear(&rec);
	}
	return true;
}

static gint by_atime(gconstpointer a, gconstpointer b)
{
	const struct found *x = a, *y = b;

	if (x->atime.tv_sec != y->atime.tv_sec)
		return x->atime.tv_sec < y->atime.tv_sec ? -1 : 1;
	return x->atime.tv_nsec < y->atime.tv_nsec ? -1 : x->atime.tv_nsec > y->atime.tv_nsec;
}

static void found_clear(gpointer p)
{
	g_free(((struct found *)p)->path);
}

/* Fills the index from names/, the least recently used first; what the
 * hooks put there meanwhile is newer and stays where it is.  False on a
 * stop. */
static bool index_store(struct kvt_evictor *ev)
{
	g_autoptr(GArray) found = g_array_new(FALSE, FALSE, sizeof(struct found));
	gint64 t0 = g_get_monotonic_time();
	guint added = 0;

	g_array_set_clear_func(found, found_clear);
	if (!walk(ev, kvt_store_names(ev->s), "", found))
		return false;
	g_array_sort(found, by_atime);
	g_mutex_lock(&ev->lock);
	for (guint i = 0; i < found->len; i++) {
		struct found *f = &g_array_index(found, struct found, i);

		if (g_hash_table_contains(ev->blocks, &f->key))
			continue;
		held(ev, block_new(f->key, f->size, f->atime.tv_sec * G_USEC_PER_SEC + f->atime.tv_nsec / 1000, f->path), false);
		added++;
	}
	ev->indexed = true;
	g_cond_broadcast(&ev->passed);
	ev->walked_at = g_get_monotonic_time();
	ev->walk_us = ev->walked_at - t0;
	g_mutex_unlock(&ev->lock);
	g_info("eviction: an index of the store's %u names built in %.1f s (%s)", added,
	       (double)(g_get_monotonic_time() - t0) / G_USEC_PER_SEC,
	       kvt_evict_policy_name(ev->o.policy));
	return true;
}

/* ------------------------------------------------------------ a pass */

/* Evicts @key; caller holds nothing.  Returns the bytes freed from the
 * index (0 when it stays or was gone), and *@evicted whether it went. */
static uint64_t evict_one(struct kvt_evictor *ev, uint64_t key, bool *evicted)
{
	g_autofree char *path = NULL;
	uint64_t size = 0;
	gint64 used_at = 0;
	struct block *b;
	bool other;
	int ret;

	g_mutex_lock(&ev->lock);
	b = g_hash_table_lookup(ev->blocks, &key);
	if (b) {
		path = g_strdup(b->path);
		size = b->size;
		used_at = b->used_at;
	}
	g_mutex_unlock(&ev->lock);
	if (!path)
		return 0;
	if (kvt_peerpins_has(ev->peers, key))
		ret = -EBUSY; /* open on another mount */
	else
		ret = ev->o.evict_name(ev->o.data, path, key, used_at);
	g_mutex_lock(&ev->lock);
	b = g_hash_table_lookup(ev->blocks, &key);
	/* The record's inode number, freed by this eviction, may already
	 * be a new block's (file systems reuse one at once): that block
	 * stays indexed as it is. */
	other = b && strcmp(b->path, path) != 0;
	if (other)
		b = NULL;
	if (ret == 0) {
		/* A store that waits takes the room now, not at the pass's
		 * end. */
		ev->freed++;
		g_cond_broadcast(&ev->passed);
	}
	if (ret == 0 || ret == -ENOENT || ret == -ESTALE) {
		if (b)
			g_hash_table_remove(ev->blocks, &key);
		if (!other)
			kvt_evict_remove(ev->order, key);
	} else if (b) {
		/* In use, used on another host, or a lower error: it stays,
		 * as used. */
		if (ret == -EAGAIN)
			b->used_at = g_get_real_time();
		kvt_evict_keep(ev->order, key, name_of(b->path), b->size);
		for (guint i = GPOINTER_TO_UINT(g_hash_table_lookup(ev->pins, &key)); i; i--)
			kvt_evict_pin(ev->order, key);
	}
	g_mutex_unlock(&ev->lock);
	*evicted = ret == 0;
	if (ret == 0)
		return size;
	if (ret != -ENOENT && ret != -ESTALE && ret != -EBUSY && ret != -EAGAIN)
		g_debug("eviction of %s: %s", path, g_strerror(-ret));
	return 0;
}

/* Writes this mount's open blocks for the other mounts (peerpins.h), if
 * they changed; the thread's. */
static void write_pins(struct kvt_evictor *ev)
{
	g_autoptr(GHashTable) keys = NULL;
	GHashTableIter it;
	gpointer k;

	g_mutex_lock(&ev->lock);
	if (ev->pins_changed) {
		keys = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
		g_hash_table_iter_init(&it, ev->pins);
		while (g_hash_table_iter_next(&it, &k, NULL))
			g_hash_table_add(keys, g_memdup2(k, sizeof(uint64_t)));
		ev->pins_changed = false;
	}
	g_mutex_unlock(&ev->lock);
	if (!keys)
		return;
	kvt_peerpins_write(ev->peers, keys);
}

/* A batch of victims, evicted by the workers. */
struct batch {
	struct kvt_evictor *ev;
	GMutex lock;
	GCond done;
	guint left;              /* under lock, with the sums: */
	uint64_t evicted, bytes;
};

struct victim {
	struct batch *b;
	uint64_t key;
};

static void evict_job(gpointer data, gpointer user)
{
	struct victim *v = data;
	struct batch *b = v->b;
	bool evicted = false;
	uint64_t bytes = 0;

	(void)user;
	/* Stopping: the index goes with the mount; only the batch's end
	 * matters. */
	if (!stopping(b->ev))
		bytes = evict_one(b->ev, v->key, &evicted);
	g_free(v);
	g_mutex_lock(&b->lock);
	b->evicted += evicted;
	b->bytes += bytes;
	if (--b->left == 0)
		g_cond_signal(&b->done);
	g_mutex_unlock(&b->lock);
}

/* Evicts @victims, EVICT_THREADS at a time; adds what went to *@evicted
 * and *@bytes. */
static void evict_batch(struct kvt_evictor *ev, GArray *victims, uint64_t *evicted,
			uint64_t *bytes)
{
	struct batch b = { .ev = ev, .left = victims->len };

	g_mutex_init(&b.lock);
	g_cond_init(&b.done);
	for (guint i = 0; i < victims->len; i++) {
		struct victim *v = g_new(struct victim, 1);

		v->b = &b;
		v->key = g_array_index(victims, uint64_t, i);
		g_thread_pool_push(ev->workers, v, NULL);
	}
	g_mutex_lock(&b.lock);
	while (b.left)
		g_cond_wait(&b.done, &b.lock);
	g_mutex_unlock(&b.lock);
	*evicted += b.evicted;
	*bytes += b.bytes;
	g_mutex_clear(&b.lock);
	g_cond_clear(&b.done);
}

/* Evicts down to @target bytes of usage.  False when it was not reached
 * and nothing could be evicted. */
static bool evict_to(struct kvt_evictor *ev, uint64_t target)
{
	g_autoptr(GArray) victims = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	gint64 t0 = g_get_monotonic_time();
	uint64_t used, evicted = 0, bytes = 0, before, tries, budget, deficit;
	guint64 more;

	if (!kvt_usage_get(ev->s, &used))
		return false;
	before = used;
	g_mutex_lock(&ev->lock);
	/* Each block is tried once a pass at most: one in use or that
	 * cannot be removed comes back as used. */
	tries = kvt_evict_count(ev->order);
	g_mutex_unlock(&ev->lock);
	/* A block gone meanwhile (another mount evicted it, a client
	 * removed it) frees nothing but leaves the index: the next choice
	 * goes on from there.  What the stores take meanwhile is the next
	 * pass's to make room for: a pass that chased them would evict more
	 * than the watermarks say, and the blocks a store is about to use. */
	deficit = used > target ? used - target : 0;
	while (used > target && bytes < deficit && tries) {
		/* Between batches, when no worker looks at them. */
		write_pins(ev);
		kvt_peerpins_read(ev->peers, TICK_US);
		g_array_set_size(victims, 0);
		g_mutex_lock(&ev->lock);
		kvt_evict_choose(ev->order, MIN(deficit - bytes, (uint64_t)1 << 30), victims);
		g_mutex_unlock(&ev->lock);
		if (!victims->len)
			break;
		/* All of them: the index forgot them when it chose them. */
		evict_batch(ev, victims, &evicted, &bytes);
		tries -= MIN(tries, (uint64_t)victims->len);
		if (stopping(ev))
			return true;
		if (!kvt_usage_get(ev->s, &used))
			break;
	}
	budget = kvt_usage_budget(ev->s);
	kvt_store_count(ev->s, KVT_STAT_evict_passes, 1);
	if (evicted) {
		kvt_store_count(ev->s, KVT_STAT_evictions, evicted);
		kvt_store_count(ev->s, KVT_STAT_evicted_bytes, bytes);
	}
	kvt_store_count(ev->s, KVT_STAT_evict_pass_us, (uint64_t)(g_get_monotonic_time() - t0));
	/* A pass that evicts nothing (all in use) is tried again by every
	 * store that waits for room: told every 10 s, not each time. */
	if (evicted || kvt_log_due(&ev->futile_log, 10 * G_USEC_PER_SEC, &more))
		g_message("eviction: %" G_GUINT64_FORMAT " names (%" G_GUINT64_FORMAT " bytes) in "
			  "%.2f s: the tier held %" G_GUINT64_FORMAT " bytes, now %" G_GUINT64_FORMAT
			  " of its budget %" G_GUINT64_FORMAT " (the pass's target %" G_GUINT64_FORMAT
			  ")%s",
			  evicted, bytes, (double)(g_get_monotonic_time() - t0) / G_USEC_PER_SEC,
			  before, used, budget, target,
			  used <= target ? "" :
			  evicted ? ": the stores under way took the room as it was made" :
				    ": nothing more can be evicted now");
	/* A pass that evicted is no sign of a full tier, though stores took
	 * the room meanwhile: a store waiting for room must not be refused
	 * for it. */
	return used <= target || evicted;
}

static void set_lead(struct kvt_evictor *ev, bool leads, bool others)
{
	g_mutex_lock(&ev->lock);
	ev->leads = leads;
	ev->others_lead = others;
	g_mutex_unlock(&ev->lock);
}

static const struct kvt_lead_job evictor_job = {
	.lock = kvt_layout_lock_evictor,
	.lock_name = "evictor's lock",
	.other = "eviction: another mount evicts from this store past evict_high; this one "
		 "makes room for its own stores only, and takes over when it is gone",
	.now = "eviction: this mount now evicts from this store past evict_high",
};

/* Whether this mount makes the passes past the high watermark: one mount
 * of a store at a time (layout.h), as one reclaims; the others make room
 * for their own stores only, and take over when it is gone. */
static bool lead(struct kvt_evictor *ev)
{
	bool leads = kvt_lead_take(&ev->s->layout, &ev->lead);

	set_lead(ev, leads, !leads);
	return leads;
}

/* @pct% of @bytes, exact: evict_high=100 is the budget itself. */
static uint64_t pct_of(uint64_t bytes, unsigned pct)
{
	return bytes / 100 * pct + bytes % 100 * pct / 100;
}

/* Whether the usage is past evict_high. */
static bool over_high(struct kvt_evictor *ev, uint64_t budget)
{
	uint64_t used;

	return budget && kvt_usage_get(ev->s, &used) && used > pct_of(budget, ev->o.high_pct);
}

/* What the usage should come down to now, or 0 when no pass is due. */
static uint64_t due(struct kvt_evictor *ev, bool waiters, uint64_t wanted, uint64_t *target)
{
	uint64_t budget = kvt_usage_budget(ev->s), used, low;

	if (!budget || !kvt_usage_get(ev->s, &used))
		return 0;
	low = pct_of(budget, ev->o.low_pct);
	if (waiters) {
		/* Ours to make; and the lead, if the mount that had it is
		 * gone. */
		(void)lead(ev);
		*target = MIN(low, budget > wanted ? budget - wanted : 0);
	}
	else if (over_high(ev, budget) && lead(ev))
		*target = low;
	else
		return 0;
	return used > *target;
}

/* How old the last walk must be for another: a walk takes a tenth of
 * the thread's time at most, and a small store is walked again at once
 * (a mount that leads but stores nothing knows no name but by a walk). */
static gint64 rewalk_after(struct kvt_evictor *ev)
{
	return CLAMP(10 * ev->walk_us, G_USEC_PER_SEC, KVT_EVICT_REWALK_S * G_USEC_PER_SEC);
}

static void set_passing(struct kvt_evictor *ev, bool passing)
{
	g_mutex_lock(&ev->lock);
	ev->passing = passing;
	g_mutex_unlock(&ev->lock);
}

static gpointer run(gpointer data)
{
	struct kvt_evictor *ev = data;
	guint64 served = 0;

	if (!index_store(ev))
		return NULL;
	/* The first mount of a store to get here leads from the start, not
	 * the first to see the usage past evict_high: kvtierfs-stat and the
	 * mount's attribute say which one evicts before it is needed. */
	(void)lead(ev);
	g_mutex_lock(&ev->lock);
	while (!ev->stop) {
		/* Stores that asked since the last look: one served by the
		 * last pass is not asking again, though it may not have
		 * woken up yet. */
		bool waiters = ev->asked != served;
		uint64_t wanted = ev->wanted, target = 0;
		/* After a pass that could evict nothing, the next waits for a
		 * change: a block stored or let go, a store that waits, or a
		 * walk due again (other mounts' stores). */
		bool done = true, futile = ev->exhausted && !waiters &&
			g_get_monotonic_time() - ev->walked_at <= rewalk_after(ev);

		served = ev->asked;
		ev->wanted = 0;
		ev->poked = false;
		g_mutex_unlock(&ev->lock);
		write_pins(ev);
		if (!futile && due(ev, waiters, wanted, &target)) {
			set_passing(ev, true);
			done = evict_to(ev, target);
			if (!done && !stopping(ev) &&
			    g_get_monotonic_time() - ev->walked_at > rewalk_after(ev)) {
				/* Other mounts' names, or moved ones: known again. */
				if (!index_store(ev))
					return NULL;
				done = evict_to(ev, target);
			}
			set_passing(ev, false);
		}
		g_mutex_lock(&ev->lock);
		if (!futile)
			ev->exhausted = !done;
		if (waiters) {
			ev->passes++;
			g_cond_broadcast(&ev->passed);
		}
		if (!ev->stop && ev->asked == served && !ev->poked)
			g_cond_wait_until(&ev->wake, &ev->lock, g_get_monotonic_time() + TICK_US);
	}
	g_mutex_unlock(&ev->lock);
	return NULL;
}

/* ------------------------------------------------------------ the API */

void kvt_evictor_start(struct kvt_store *s, const struct kvt_evictor_opts *o)
{
	struct kvt_evictor *ev;

	if (!s->usage)
		return;
	ev = g_new0(struct kvt_evictor, 1);
	ev->s = s;
	ev->o = *o;
	g_mutex_init(&ev->lock);
	g_cond_init(&ev->wake);
	g_cond_init(&ev->passed);
	ev->lead = KVT_LEAD_INIT(&evictor_job);
	ev->order = kvt_evict_new(o->policy, NULL);
	ev->blocks = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
	ev->pins = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
	ev->workers = g_thread_pool_new(evict_job, NULL, EVICT_THREADS, TRUE, NULL);
	ev->peers = kvt_peerpins_new(s);
	s->evictor = ev;
	ev->thread = g_thread_new("kvt-evict", run, ev);
}

void kvt_evictor_stop(struct kvt_store *s)
{
	struct kvt_evictor *ev = s->evictor;

	if (!ev)
		return;
	g_mutex_lock(&ev->lock);
	ev->stop = true;
	g_cond_broadcast(&ev->wake);
	g_cond_broadcast(&ev->passed);
	g_mutex_unlock(&ev->lock);
	g_thread_join(ev->thread);
	g_thread_pool_free(ev->workers, FALSE, TRUE);
	kvt_peerpins_free(ev->peers);
	s->evictor = NULL;
	kvt_lead_release(&ev->lead);
	kvt_evict_free(ev->order);
	g_hash_table_destroy(ev->blocks);
	g_hash_table_destroy(ev->pins);
	g_mutex_clear(&ev->lock);
	g_cond_clear(&ev->wake);
	g_cond_clear(&ev->passed);
	g_free(ev);
}

void kvt_evictor_stored(struct kvt_store *s, struct kvt_dir *d, const char *name, uint64_t key,
			uint64_t size)
{
	struct kvt_evictor *ev = s->evictor;
	g_autofree char *path = NULL;
	bool poke;

	if (!ev || !key)
		return;
	path = kvt_name_path(s, d, name);
	if (g_str_has_prefix(path, "(moved)/"))
		return; /* moved meanwhile: the next walk finds it */
	poke = over_high(ev, kvt_usage_budget(s));
	g_mutex_lock(&ev->lock);
	held(ev, block_new(key, size, g_get_real_time(), path), true);
	/* A pass starts now, not at the next tick: the stores that follow
	 * find room instead of waiting for it. */
	if (poke && !ev->poked) {
		ev->poked = true;
		g_cond_signal(&ev->wake);
	}
	g_mutex_unlock(&ev->lock);
}

void kvt_evictor_moved(struct kvt_store *s, uint64_t key, struct kvt_dir *d, const char *name)
{
	struct kvt_evictor *ev = s->evictor;
	g_autofree char *path = NULL;
	struct block *b;

	if (!ev)
		return;
	path = kvt_name_path(s, d, name);
	g_mutex_lock(&ev->lock);
	b = g_hash_table_lookup(ev->blocks, &key);
	if (b && !g_str_has_prefix(path, "(moved)/")) {
		b = block_new(key, b->size, b->used_at, path);
		g_hash_table_replace(ev->blocks, b, b);
	}
	g_mutex_unlock(&ev->lock);
}

void kvt_evictor_pin(struct kvt_store *s, uint64_t key, bool load)
{
	struct kvt_evictor *ev = s->evictor;
	gpointer k, v;

	if (!ev || !key)
		return;
	g_mutex_lock(&ev->lock);
	if (g_hash_table_lookup_extended(ev->pins, &key, &k, &v)) {
		g_hash_table_steal(ev->pins, &key);
	} else {
		k = g_memdup2(&key, sizeof(key));
		v = NULL;
	}
	g_hash_table_insert(ev->pins, k, GUINT_TO_POINTER(GPOINTER_TO_UINT(v) + 1));
	ev->pins_changed |= !v;
	if (load && kvt_evict_touch(ev->order, key))
		((struct block *)g_hash_table_lookup(ev->blocks, &key))->used_at =
			g_get_real_time();
	kvt_evict_pin(ev->order, key);
	g_mutex_unlock(&ev->lock);
}

void kvt_evictor_unpin(struct kvt_store *s, uint64_t key)
{
	struct kvt_evictor *ev = s->evictor;
	guint n;

	if (!ev || !key)
		return;
	g_mutex_lock(&ev->lock);
	n = GPOINTER_TO_UINT(g_hash_table_lookup(ev->pins, &key));
	if (n > 1)
		g_hash_table_insert(ev->pins, g_memdup2(&key, sizeof(key)), GUINT_TO_POINTER(n - 1));
	else if (g_hash_table_remove(ev->pins, &key))
		ev->pins_changed = true;
	if (n)
		kvt_evict_unpin(ev->order, key);
	/* Room may be there now for a store that was refused. */
	ev->exhausted = false;
	g_mutex_unlock(&ev->lock);
}

bool kvt_evictor_pinned(struct kvt_store *s, uint64_t key)
{
	struct kvt_evictor *ev = s->evictor;
	bool pinned;

	if (!ev)
		return false;
	g_mutex_lock(&ev->lock);
	pinned = g_hash_table_contains(ev->pins, &key);
	g_mutex_unlock(&ev->lock);
	return pinned;
}

void kvt_evictor_forget(struct kvt_store *s, uint64_t key)
{
	struct kvt_evictor *ev = s->evictor;

	if (!ev || !key)
		return;
	g_mutex_lock(&ev->lock);
	g_hash_table_remove(ev->blocks, &key);
	kvt_evict_remove(ev->order, key);
	g_mutex_unlock(&ev->lock);
}

bool kvt_evictor_make_room(struct kvt_store *s, uint64_t size)
{
	struct kvt_evictor *ev = s->evictor;
	gint64 until = g_get_monotonic_time() + ROOM_WAIT_US;
	gint64 until_max = g_get_monotonic_time() + ROOM_WAIT_MAX_US;
	guint64 passes, freed;
	bool room;

	if (!ev)
		return false;
	g_mutex_lock(&ev->lock);
	/* While the index is built nothing can be chosen: a store waits for
	 * it (ROOM_WAIT_MAX_US at most: a million names take seconds on a
	 * busy machine) rather than be refused for nothing. */
	while (!ev->indexed && !ev->stop && g_cond_wait_until(&ev->passed, &ev->lock, until_max))
		;
	if (!ev->indexed || ev->stop) {
		g_mutex_unlock(&ev->lock);
		return false;
	}
	ev->asked++;
	ev->wanted = MAX(ev->wanted, size);
	passes = ev->passes;
	freed = ev->freed;
	g_cond_signal(&ev->wake);
	/* Until a block goes (the caller looks at the room again) or a pass
	 * ends.  A pass that is evicting is waited for past ROOM_WAIT_US, up
	 * to ROOM_WAIT_MAX_US: on a loaded machine a pass can take longer,
	 * and a store refused while it goes on would be refused for
	 * nothing. */
	while (ev->passes == passes && ev->freed == freed && !ev->stop)
		if (!g_cond_wait_until(&ev->passed, &ev->lock, until)) {
			if (!ev->passing || g_get_monotonic_time() >= until_max)
				break;
			until = MIN(until_max, g_get_monotonic_time() + ROOM_WAIT_US);
		}
	room = ev->freed != freed || (ev->passes != passes && !ev->exhausted);
	/* Nothing this mount knows of could go, but the mount that leads
	 * evicts what this one's stores add to the usage (ledger.h): the
	 * room it makes shows here within a second.  The caller looks
	 * again, for as long as it waits for room. */
	if (!room && ev->others_lead && ev->passes != passes && !ev->stop) {
		g_cond_wait_until(&ev->passed, &ev->lock,
				  MIN(until_max, g_get_monotonic_time() + G_USEC_PER_SEC));
		room = true;
	}
	g_mutex_unlock(&ev->lock);
	return room;
}

bool kvt_evictor_info(struct kvt_store *s, struct kvt_evictor_info *out)
{
	struct kvt_evictor *ev = s->evictor;

	memset(out, 0, sizeof(*out));
	if (!ev)
		return false;
	g_mutex_lock(&ev->lock);
	out->indexed = ev->indexed;
	out->passing = ev->passing;
	out->leads = ev->leads;
	out->blocks = kvt_evict_count(ev->order);
	out->bytes = kvt_evict_bytes(ev->order);
	out->pinned_bytes = kvt_evict_pinned_bytes(ev->order);
	out->policy = kvt_evict_policy_name(ev->o.policy);
	out->high_pct = ev->o.high_pct;
	out->low_pct = ev->o.low_pct;
	g_mutex_unlock(&ev->lock);
	return true;
}
