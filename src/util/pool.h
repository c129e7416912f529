/* A pool of idle buffers (or anything freed by one call): what is lent
 * for one operation comes back here, and up to @keep are kept for the
 * next ones, so the memory held is what was in use at once, not one for
 * every thread that ever used one. */
#pragma once
#include <glib.h>

struct kvt_pool {
	GMutex lock;
	GSList *idle;
	unsigned n_idle, keep;
	GDestroyNotify free;
};

#define KVT_POOL_INIT(keep_, free_) { .keep = (keep_), .free = (free_) }

/* An idle item, or NULL: the caller makes a new one. */
gpointer kvt_pool_get(struct kvt_pool *p);
/* Gives @item back (NULL: nothing); freed if @keep are idle already. */
void kvt_pool_put(struct kvt_pool *p, gpointer item);
/* Frees every idle item. */
void kvt_pool_clear(struct kvt_pool *p);
