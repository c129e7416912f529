/* The pool of verified copies (memcopy.h). */
#include "memcopy.h"

#include <fcntl.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <unistd.h>

/* Sizes are rounded up to this, so that blocks of one size share copies. */
#define UNIT ((uint64_t)1 << 20)

struct kvt_copies {
	GMutex lock;
	uint64_t budget;
	uint64_t held;   /* bytes of copies in use and pooled */
	uint64_t pooled; /* bytes of copies in the pool */
	GQueue pool;     /* struct kvt_copy, the last put first */
};

struct kvt_copies *kvt_copies_new(uint64_t budget)
{
	struct kvt_copies *c = g_new0(struct kvt_copies, 1);

	g_mutex_init(&c->lock);
	c->budget = budget;
	return c;
}

static void copy_free(struct kvt_copy *cp)
{
	munmap(cp->map, cp->size);
	close(cp->fd);
	g_free(cp);
}

void kvt_copies_free(struct kvt_copies *c)
{
	if (!c)
		return;
	g_queue_clear_full(&c->pool, (GDestroyNotify)copy_free);
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

struct kvt_copy *kvt_copy_get(struct kvt_copies *c, uint64_t size)
{
	g_autoptr(GPtrArray) drop = g_ptr_array_new_with_free_func((GDestroyNotify)copy_free);
	struct kvt_copy *cp = NULL;
	uint64_t want;

	if (!c || size == 0 || size > SIZE_MAX - UNIT)
		return NULL;
	want = (size + UNIT - 1) / UNIT * UNIT;
	g_mutex_lock(&c->lock);
	for (GList *l = c->pool.head; l; l = l->next) {
		if (((struct kvt_copy *)l->data)->size == want) {
			cp = l->data;
			g_queue_delete_link(&c->pool, l);
			c->pooled -= want;
			break;
		}
	}
	/* Room for a new one: the oldest pooled copies go first. */
	while (!cp && c->held + want > c->budget && c->pool.length) {
		struct kvt_copy *old = g_queue_pop_tail(&c->pool);

		c->pooled -= old->size;
		c->held -= old->size;
		g_ptr_array_add(drop, old);
	}
	if (!cp && c->held + want <= c->budget)
		c->held += want;
	else if (!cp)
		want = 0; /* no room */
	g_mutex_unlock(&c->lock);
	if (cp || !want)
		return cp;
	cp = copy_new(want);
	if (!cp) {
		g_mutex_lock(&c->lock);
		c->held -= want;
		g_mutex_unlock(&c->lock);
	}
	return cp;
}

void kvt_copy_put(struct kvt_copies *c, struct kvt_copy *cp)
{
	bool keep;

	g_mutex_lock(&c->lock);
	/* A quarter of the budget stays ready; the rest goes back to the
	 * system once the loads that needed it are done. */
	keep = c->pooled + cp->size <= c->budget / 4;
	if (keep) {
		g_queue_push_head(&c->pool, cp);
		c->pooled += cp->size;
	} else {
		c->held -= cp->size;
	}
	g_mutex_unlock(&c->lock);
	if (!keep)
		copy_free(cp);
}
