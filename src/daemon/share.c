/* The sharing watch: a thread that looks every second whether another
 * mount uses the store, sets by it how long the kernel may keep names and
 * attributes, and makes the kernel forget what it holds when one appears
 * (share.h). */
#include "share.h"

#include "inode.h"
#include "notify.h"
#include "store.h"

#define CHECK_US G_USEC_PER_SEC

struct kvt_share_watch {
	struct kvt_fs *fs;
	bool warned;    /* about staging/ that cannot be read */
	bool again;     /* forget everything once more at the next look */
	GMutex lock;
	GCond cond;
	bool stop;
	GThread *thread;
};

/* The kernel forgets every name and attribute it holds of this mount:
 * they were cached for a day, and another mount may now change them. */
static void forget_all(struct kvt_fs *fs)
{
	g_autoptr(GPtrArray) notes = g_ptr_array_new();

	kvt_tree_lock(fs);
	g_mutex_lock(&fs->live_lock);
	for (GList *l = fs->live_inodes.head; l; l = l->next) {
		struct kvt_inode *ino = l->data;
		struct kvt_note *n;

		if (ino == fs->root || !ino->parent || ino->unlinked)
			continue;
		n = g_new0(struct kvt_note, 1);
		n->parent = kvt_nodeid_of(fs, ino->parent);
		n->name = g_strdup(ino->name);
		n->child = kvt_nodeid_of(fs, ino);
		g_ptr_array_add(notes, n);
	}
	g_mutex_unlock(&fs->live_lock);
	kvt_tree_unlock(fs);
	for (guint i = 0; i < notes->len; i++) {
		kvt_notify(fs, notes->pdata[i], false);
		g_free(notes->pdata[i]);
	}
}

static void look(struct kvt_share_watch *w)
{
	struct kvt_fs *fs = w->fs;
	int others = kvt_store_other_mount_live(fs->store);
	bool was = __atomic_load_n(&fs->shared, __ATOMIC_ACQUIRE);
	bool now = others != 0;

	if (others < 0 && !w->warned) {
		g_warning("staging/ cannot be read (%s): the store counts as shared",
			  g_strerror(-others));
		w->warned = true;
	}
	if (others >= 0)
		w->warned = false;
	if (w->again && now) {
		/* A reply built just before the switch may have taken the
		 * day's timeout after the first pass. */
		forget_all(fs);
		w->again = false;
	}
	if (now == was)
		return;
	__atomic_store_n(&fs->shared, now, __ATOMIC_RELEASE);
	if (now) {
		forget_all(fs);
		w->again = true;
		g_message("another mount uses the store: the kernel keeps names and attributes for "
			  "%g s", KVT_SHARED_TIMEOUT);
	} else {
		g_message("no other mount uses the store: the kernel keeps names and attributes for "
			  "%g s", KVT_ALONE_TIMEOUT);
	}
}

static gpointer run(gpointer data)
{
	struct kvt_share_watch *w = data;

	g_mutex_lock(&w->lock);
	while (!w->stop) {
		gint64 until = g_get_monotonic_time() + CHECK_US;

		while (!w->stop && g_get_monotonic_time() < until)
			g_cond_wait_until(&w->cond, &w->lock, until);
		if (w->stop)
			break;
		g_mutex_unlock(&w->lock);
		look(w);
		g_mutex_lock(&w->lock);
	}
	g_mutex_unlock(&w->lock);
	return NULL;
}

struct kvt_share_watch *kvt_share_watch_start(struct kvt_fs *fs, bool forced)
{
	struct kvt_share_watch *w = g_new0(struct kvt_share_watch, 1);

	w->fs = fs;
	g_mutex_init(&w->lock);
	g_cond_init(&w->cond);
	if (forced) {
		__atomic_store_n(&fs->shared, true, __ATOMIC_RELEASE);
		g_message("-o shared: the kernel keeps names and attributes for %g s",
			  KVT_SHARED_TIMEOUT);
		return w;
	}
	/* A mount starts alone, and says so only when it is not. */
	__atomic_store_n(&fs->shared, false, __ATOMIC_RELEASE);
	look(w);
	w->thread = g_thread_new("kvt-share", run, w);
	return w;
}

void kvt_share_watch_stop(struct kvt_share_watch *w)
{
	if (!w)
		return;
	g_mutex_lock(&w->lock);
	w->stop = true;
	g_cond_broadcast(&w->cond);
	g_mutex_unlock(&w->lock);
	if (w->thread)
		g_thread_join(w->thread);
	g_cond_clear(&w->cond);
	g_mutex_clear(&w->lock);
	g_free(w);
}
