/* The bounded directory cache (dircache.h): a hash table for the lookup
 * and a queue for the order of use, under one mutex taken for a few
 * pointer moves (no system call is made under it but the close of an
 * evicted directory's last reference, which cannot block). */
#include "dircache.h"

struct entry {
	uint64_t key;
	struct kvt_dir *dir;
	GList link; /* in order, least recently used first */
};

struct kvt_dircache {
	GMutex lock;
	guint capacity;
	GHashTable *by_key; /* &entry->key -> entry */
	GQueue order;
};

static void entry_free(gpointer p)
{
	struct entry *e = p;

	kvt_dir_unref(e->dir);
	g_free(e);
}

struct kvt_dircache *kvt_dircache_new(guint capacity)
{
	struct kvt_dircache *c = g_new0(struct kvt_dircache, 1);

	g_mutex_init(&c->lock);
	c->capacity = MAX(capacity, 1);
	c->by_key = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, entry_free);
	g_queue_init(&c->order);
	return c;
}

guint kvt_dircache_capacity(const struct kvt_dircache *c)
{
	return c->capacity;
}

void kvt_dircache_free(struct kvt_dircache *c)
{
	if (!c)
		return;
	g_hash_table_unref(c->by_key);
	g_mutex_clear(&c->lock);
	g_free(c);
}

struct kvt_dir *kvt_dircache_get(struct kvt_dircache *c, uint64_t key)
{
	struct kvt_dir *d = NULL;
	struct entry *e;

	g_mutex_lock(&c->lock);
	e = g_hash_table_lookup(c->by_key, &key);
	if (e) {
		g_queue_unlink(&c->order, &e->link);
		g_queue_push_tail_link(&c->order, &e->link);
		d = kvt_dir_ref(e->dir);
	}
	g_mutex_unlock(&c->lock);
	return d;
}

static void remove_locked(struct kvt_dircache *c, struct entry *e)
{
	g_queue_unlink(&c->order, &e->link);
	g_hash_table_remove(c->by_key, &e->key);
}

void kvt_dircache_put(struct kvt_dircache *c, uint64_t key, struct kvt_dir *d)
{
	struct entry *e = g_new0(struct entry, 1), *old;

	e->key = key;
	e->dir = kvt_dir_ref(d);
	e->link.data = e;
	g_mutex_lock(&c->lock);
	old = g_hash_table_lookup(c->by_key, &key);
	if (old)
		remove_locked(c, old);
	while (c->order.length >= c->capacity)
		remove_locked(c, c->order.head->data);
	g_hash_table_insert(c->by_key, &e->key, e);
	g_queue_push_tail_link(&c->order, &e->link);
	g_mutex_unlock(&c->lock);
}

void kvt_dircache_drop(struct kvt_dircache *c, uint64_t key)
{
	struct entry *e;

	g_mutex_lock(&c->lock);
	e = g_hash_table_lookup(c->by_key, &key);
	if (e)
		remove_locked(c, e);
	g_mutex_unlock(&c->lock);
}

guint kvt_dircache_size(struct kvt_dircache *c)
{
	guint n;

	g_mutex_lock(&c->lock);
	n = c->order.length;
	g_mutex_unlock(&c->lock);
	return n;
}
