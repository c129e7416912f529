/* The eviction order: S3-FIFO and an exact LRU (evict.h says what each
 * does and what it costs).
 *
 * Every block is a node in one hash table and in one queue, linked
 * through the node itself, so that a use, a removal or a move between
 * queues is O(1) and allocates nothing.  The table is a set of nodes:
 * the key is the node's first field, so a pointer to the node is a
 * pointer to its key, and the table keeps no separate values.  Queues
 * run from the head (oldest, next to go) to the tail (newest). */
#include "evict.h"

#include <stddef.h>

enum where {
	Q_SMALL,        /* S3-FIFO's small FIFO, SLRU's probation */
	Q_MAIN,         /* S3-FIFO's main FIFO, SLRU's protected, the LRU */
	Q_GHOST,        /* keys that left the small FIFO, no block behind */
	Q_GHOST_MAIN,   /* adaptive S3-FIFO: keys that left main */
	Q_COUNT,
};

#define FREQ_MAX 3      /* S3-FIFO's 2-bit count of loads */
/* Adaptive S3-FIFO: how far a ghost's return moves the small FIFO's
 * share, in blocks of its size.  ARC's one block adapted too slowly on
 * kvtierfs-bench --life --simulate: 16 kept the hits of an LRU at every
 * budget measured but one (docs/performance.md). */
#define ADAPT_GAIN 16
#define ADAPT_MIN_SHARE 0.01
#define ADAPT_MAX_SHARE 0.99

struct node {
	uint64_t key;   /* first: the table hashes the node as its key; a
			 * ghost's is its name */
	uint64_t name;  /* what a ghost is known by (kvt_evict_insert_as) */
	uint64_t size;
	GList link;
	uint32_t pins;
	uint8_t where;
	uint8_t freq;
};

G_STATIC_ASSERT(offsetof(struct node, key) == 0);
/* evict.h states the memory a block costs: malloc's chunk of 64 */
G_STATIC_ASSERT(sizeof(struct node) <= 56);

struct kvt_evict {
	enum kvt_evict_policy policy;
	struct kvt_evict_tuning tune;
	GHashTable *nodes;              /* the blocks' nodes, by key */
	GHashTable *ghosts;             /* the ghosts' nodes, by name */
	GQueue q[Q_COUNT];
	uint64_t qbytes[Q_COUNT];
	uint64_t qpinned[Q_COUNT];      /* pinned nodes in each queue */
	uint64_t pinned_bytes;
	double small_share;             /* adaptive S3-FIFO: the small FIFO's */
};

static bool is_ghost(const struct node *n)
{
	return n->where == Q_GHOST || n->where == Q_GHOST_MAIN;
}

static bool is_s3fifo(const struct kvt_evict *e)
{
	return e->policy == KVT_EVICT_S3FIFO || e->policy == KVT_EVICT_S3FIFO_ADAPTIVE;
}

struct kvt_evict *kvt_evict_new(enum kvt_evict_policy policy,
				const struct kvt_evict_tuning *tuning)
{
	struct kvt_evict *e = g_new0(struct kvt_evict, 1);

	e->policy = policy;
	if (tuning)
		e->tune = *tuning;
	if (!e->tune.small_pct)
		e->tune.small_pct = 10;
	e->tune.small_pct = MIN(e->tune.small_pct, 100);
	if (!e->tune.promote_loads)
		e->tune.promote_loads = 1;
	e->tune.promote_loads = MIN(e->tune.promote_loads, FREQ_MAX);
	if (!e->tune.protected_pct)
		e->tune.protected_pct = 80;
	e->tune.protected_pct = MIN(e->tune.protected_pct, 100);
	if (!e->tune.ghost_pct)
		e->tune.ghost_pct = 100;
	e->tune.ghost_pct = MIN(e->tune.ghost_pct, 100);
	e->small_share = e->tune.small_pct / 100.0;
	e->nodes = g_hash_table_new(g_int64_hash, g_int64_equal);
	e->ghosts = g_hash_table_new(g_int64_hash, g_int64_equal);
	for (int i = 0; i < Q_COUNT; i++)
		g_queue_init(&e->q[i]);
	return e;
}

void kvt_evict_free(struct kvt_evict *e)
{
	if (!e)
		return;
	for (int i = 0; i < Q_COUNT; i++) {
		GList *l = e->q[i].head;

		while (l) {
			GList *next = l->next;

			g_free(l->data);
			l = next;
		}
	}
	g_hash_table_destroy(e->nodes);
	g_hash_table_destroy(e->ghosts);
	g_free(e);
}

/* A node that stands for a block, not a ghost. */
static struct node *find_held(const struct kvt_evict *e, uint64_t key)
{
	return g_hash_table_lookup(e->nodes, &key);
}

static void q_push(struct kvt_evict *e, struct node *n, enum where w)
{
	n->where = (uint8_t)w;
	g_queue_push_tail_link(&e->q[w], &n->link);
	e->qbytes[w] += n->size;
	if (n->pins)
		e->qpinned[w]++;
}

static void q_unlink(struct kvt_evict *e, struct node *n)
{
	g_queue_unlink(&e->q[n->where], &n->link);
	e->qbytes[n->where] -= n->size;
	if (n->pins)
		e->qpinned[n->where]--;
}

static void drop(struct kvt_evict *e, struct node *n)
{
	q_unlink(e, n);
	if (n->pins)
		e->pinned_bytes -= n->size;
	g_hash_table_remove(is_ghost(n) ? e->ghosts : e->nodes, &n->key);
	g_free(n);
}

/* SLRU: a block used again is protected; protected ones past their
 * share go back to probation, the least recently used first. */
static void use_slru(struct kvt_evict *e, struct node *n)
{
	uint64_t held;

	q_unlink(e, n);
	q_push(e, n, Q_MAIN);
	held = e->qbytes[Q_SMALL] + e->qbytes[Q_MAIN];
	while (e->q[Q_MAIN].length > 1 &&
	       e->qbytes[Q_MAIN] * 100 > held * e->tune.protected_pct) {
		struct node *old = e->q[Q_MAIN].head->data;

		q_unlink(e, old);
		q_push(e, old, Q_SMALL);
	}
}

/* A store or a load of a held block. */
static void use(struct kvt_evict *e, struct node *n)
{
	if (e->policy == KVT_EVICT_LRU) {
		q_unlink(e, n);
		q_push(e, n, Q_MAIN);
	} else if (e->policy == KVT_EVICT_SLRU) {
		use_slru(e, n);
	} else if (n->freq < FREQ_MAX) {
		n->freq++;
	}
}

uint64_t kvt_evict_count(const struct kvt_evict *e)
{
	return e->q[Q_SMALL].length + e->q[Q_MAIN].length;
}

/* Ghosts past their share of the blocks held go, oldest first. */
static void trim_ghosts(struct kvt_evict *e)
{
	uint64_t max = kvt_evict_count(e) * e->tune.ghost_pct / 100;

	while (e->q[Q_GHOST].length + e->q[Q_GHOST_MAIN].length > max) {
		enum where w = e->q[Q_GHOST].length >= e->q[Q_GHOST_MAIN].length
			       ? Q_GHOST : Q_GHOST_MAIN;

		drop(e, e->q[w].head->data);
	}
}

/* Adaptive S3-FIFO, as ARC adapts its target: a key back from the small
 * FIFO's ghosts says that FIFO was too small, one back from main's ghosts
 * that main was; the share moves by the block's part of the bytes held,
 * more when the other ghosts are the more numerous.  A one-off scan
 * leaves ghosts that never return, and so moves nothing. */
static void adapt(struct kvt_evict *e, const struct node *n, uint64_t size)
{
	double held = (double)MAX(e->qbytes[Q_SMALL] + e->qbytes[Q_MAIN], 1);
	double gs = (double)MAX(e->q[Q_GHOST].length, 1);
	double gm = (double)MAX(e->q[Q_GHOST_MAIN].length, 1);
	double step = ADAPT_GAIN * (double)size / held;

	if (n->where == Q_GHOST)
		e->small_share = MIN(e->small_share + step * MAX(gm / gs, 1),
				     ADAPT_MAX_SHARE);
	else
		e->small_share = MAX(e->small_share - step * MAX(gs / gm, 1),
				     ADAPT_MIN_SHARE);
}

/* Ghost @n stands for block @key again, in main. */
static void unghost(struct kvt_evict *e, struct node *n, uint64_t key, uint64_t size)
{
	g_hash_table_remove(e->ghosts, &n->key);
	q_unlink(e, n);
	n->key = key;
	n->size = size;
	n->freq = 0;
	g_hash_table_add(e->nodes, n);
	q_push(e, n, Q_MAIN);
}

bool kvt_evict_insert_as(struct kvt_evict *e, uint64_t key, uint64_t name, uint64_t size)
{
	struct node *n = find_held(e, key);

	if (n) {
		e->qbytes[n->where] = e->qbytes[n->where] - n->size + size;
		if (n->pins)
			e->pinned_bytes = e->pinned_bytes - n->size + size;
		n->size = size;
		n->name = name;
		use(e, n);
		return false;
	}
	n = g_hash_table_lookup(e->ghosts, &name);
	if (n) {
		/* S3-FIFO: it was evicted too early once; main keeps it */
		if (e->policy == KVT_EVICT_S3FIFO_ADAPTIVE)
			adapt(e, n, size);
		unghost(e, n, key, size);
		n->name = name;
		return true;
	}
	n = g_new0(struct node, 1);
	n->key = key;
	n->name = name;
	n->size = size;
	n->link.data = n;
	g_hash_table_add(e->nodes, n);
	q_push(e, n, e->policy == KVT_EVICT_LRU ? Q_MAIN : Q_SMALL);
	return true;
}

bool kvt_evict_insert(struct kvt_evict *e, uint64_t key, uint64_t size)
{
	return kvt_evict_insert_as(e, key, key, size);
}

void kvt_evict_keep(struct kvt_evict *e, uint64_t key, uint64_t name, uint64_t size)
{
	struct node *n = g_hash_table_lookup(e->ghosts, &name);

	if (!find_held(e, key) && n)
		unghost(e, n, key, size);
	else
		kvt_evict_insert_as(e, key, name, size);
}

bool kvt_evict_touch(struct kvt_evict *e, uint64_t key)
{
	struct node *n = find_held(e, key);

	if (n)
		use(e, n);
	return n != NULL;
}

bool kvt_evict_remove(struct kvt_evict *e, uint64_t key)
{
	struct node *n = find_held(e, key);

	if (!n)
		return false;
	drop(e, n);
	trim_ghosts(e);
	return true;
}

bool kvt_evict_contains(const struct kvt_evict *e, uint64_t key)
{
	return find_held(e, key) != NULL;
}

bool kvt_evict_pin(struct kvt_evict *e, uint64_t key)
{
	struct node *n = find_held(e, key);

	if (!n)
		return false;
	if (n->pins++ == 0) {
		e->qpinned[n->where]++;
		e->pinned_bytes += n->size;
	}
	return true;
}

void kvt_evict_unpin(struct kvt_evict *e, uint64_t key)
{
	struct node *n = find_held(e, key);

	if (!n || !n->pins)
		return;
	if (--n->pins == 0) {
		e->qpinned[n->where]--;
		e->pinned_bytes -= n->size;
	}
}

static uint64_t unpinned_in(const struct kvt_evict *e, enum where w)
{
	return e->q[w].length - e->qpinned[w];
}

/* Appends @n's key to @victims and forgets @n's block; S3-FIFO keeps the
 * key of a block that leaves the small FIFO as a ghost. */
static uint64_t victim(struct kvt_evict *e, struct node *n, GArray *victims)
{
	uint64_t size = n->size;

	g_array_append_val(victims, n->key);
	if ((is_s3fifo(e) && n->where == Q_SMALL) ||
	    (e->policy == KVT_EVICT_S3FIFO_ADAPTIVE && n->where == Q_MAIN)) {
		enum where ghost = n->where == Q_SMALL ? Q_GHOST : Q_GHOST_MAIN;
		struct node *old = g_hash_table_lookup(e->ghosts, &n->name);

		/* Known by its name from now on: a ghost of that name
		 * before it is the same block's, older. */
		if (old)
			drop(e, old);
		g_hash_table_remove(e->nodes, &n->key);
		q_unlink(e, n);
		n->key = n->name;
		if (ghost == Q_GHOST)
			n->freq = 0;
		g_hash_table_add(e->ghosts, n);
		q_push(e, n, ghost);
	} else {
		drop(e, n);
	}
	return size;
}

/* The unpinned blocks of queue @w, least recently used first, until
 * @bytes are freed. */
static uint64_t choose_lru(struct kvt_evict *e, enum where w, uint64_t bytes,
			   GArray *victims)
{
	uint64_t freed = 0;

	for (GList *l = e->q[w].head, *next; l && freed < bytes; l = next) {
		struct node *n = l->data;

		next = l->next;
		if (!n->pins)
			freed += victim(e, n, victims);
	}
	return freed;
}

/* The small FIFO's head: a block in use or loaded since it came moves to
 * main, any other goes. */
static uint64_t step_small(struct kvt_evict *e, GArray *victims)
{
	struct node *n = e->q[Q_SMALL].head->data;

	if (!n->pins && n->freq < e->tune.promote_loads)
		return victim(e, n, victims);
	q_unlink(e, n);
	if (!n->pins)
		n->freq = 0;
	q_push(e, n, Q_MAIN);
	return 0;
}

/* Main's head: a block in use goes round again, one loaded since it last
 * came round goes round with one load less, any other goes. */
static uint64_t step_main(struct kvt_evict *e, GArray *victims)
{
	struct node *n = e->q[Q_MAIN].head->data;

	if (!n->pins && !n->freq)
		return victim(e, n, victims);
	if (!n->pins)
		n->freq--;
	q_unlink(e, n);
	q_push(e, n, Q_MAIN);
	return 0;
}

static uint64_t choose_s3fifo(struct kvt_evict *e, uint64_t bytes, GArray *victims)
{
	uint64_t freed = 0;

	while (freed < bytes && unpinned_in(e, Q_SMALL) + unpinned_in(e, Q_MAIN)) {
		uint64_t held = e->qbytes[Q_SMALL] + e->qbytes[Q_MAIN];
		/* Its newest block stays while main has one to give: in a
		 * budget of a few blocks the share holds less than one, and
		 * each block stored would go at the next pass. */
		bool small_full = e->q[Q_SMALL].length > 1 &&
				  (double)e->qbytes[Q_SMALL] >= (double)held * e->small_share;

		/* each step evicts, or moves a block on with a pin or a load
		 * less, so that the loop ends */
		if (e->q[Q_SMALL].length && (small_full || !unpinned_in(e, Q_MAIN)))
			freed += step_small(e, victims);
		else
			freed += step_main(e, victims);
	}
	trim_ghosts(e);
	return freed;
}

uint64_t kvt_evict_choose(struct kvt_evict *e, uint64_t bytes, GArray *victims)
{
	uint64_t freed;

	switch (e->policy) {
	case KVT_EVICT_LRU:
		return choose_lru(e, Q_MAIN, bytes, victims);
	case KVT_EVICT_SLRU:
		/* probation first; protected blocks only once it is empty */
		freed = choose_lru(e, Q_SMALL, bytes, victims);
		if (freed < bytes)
			freed += choose_lru(e, Q_MAIN, bytes - freed, victims);
		return freed;
	case KVT_EVICT_S3FIFO:
	case KVT_EVICT_S3FIFO_ADAPTIVE:
		break;
	}
	return choose_s3fifo(e, bytes, victims);
}

uint64_t kvt_evict_bytes(const struct kvt_evict *e)
{
	return e->qbytes[Q_SMALL] + e->qbytes[Q_MAIN];
}

uint64_t kvt_evict_pinned_bytes(const struct kvt_evict *e)
{
	return e->pinned_bytes;
}

uint64_t kvt_evict_ghosts(const struct kvt_evict *e)
{
	return e->q[Q_GHOST].length + e->q[Q_GHOST_MAIN].length;
}

const char *kvt_evict_policy_name(enum kvt_evict_policy policy)
{
	switch (policy) {
	case KVT_EVICT_LRU:
		return "lru";
	case KVT_EVICT_SLRU:
		return "slru";
	case KVT_EVICT_S3FIFO_ADAPTIVE:
		return "s3fifo_adaptive";
	case KVT_EVICT_S3FIFO:
		break;
	}
	return "s3fifo";
}
