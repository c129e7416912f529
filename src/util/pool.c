/* Pools of idle buffers (pool.h). */
#include "pool.h"

gpointer kvt_pool_get(struct kvt_pool *p)
{
	gpointer item = NULL;

	g_mutex_lock(&p->lock);
	if (p->idle) {
		item = p->idle->data;
		p->idle = g_slist_delete_link(p->idle, p->idle);
		p->n_idle--;
	}
	g_mutex_unlock(&p->lock);
	return item;
}

void kvt_pool_put(struct kvt_pool *p, gpointer item)
{
	if (!item)
		return;
	g_mutex_lock(&p->lock);
	if (p->n_idle < p->keep) {
		p->idle = g_slist_prepend(p->idle, item);
		p->n_idle++;
		item = NULL;
	}
	g_mutex_unlock(&p->lock);
	if (item)
		p->free(item);
}

void kvt_pool_clear(struct kvt_pool *p)
{
	GSList *idle;

	g_mutex_lock(&p->lock);
	idle = g_steal_pointer(&p->idle);
	p->n_idle = 0;
	g_mutex_unlock(&p->lock);
	g_slist_free_full(idle, p->free);
}
