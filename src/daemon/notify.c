/* The notifier thread (notify.h). */
#include "notify.h"

#include <string.h>

struct kvt_notifier {
	GThreadPool *pool;
};

static void send(struct kvt_fs *fs, struct kvt_note *n)
{
	if (fs->se && n->name)
		fuse_lowlevel_notify_inval_entry(fs->se, n->parent, n->name, strlen(n->name));
	if (fs->se && n->child)
		fuse_lowlevel_notify_inval_inode(fs->se, n->child, 0, 0);
}

static void run(gpointer data, gpointer user)
{
	struct kvt_note *n = data;

	send(user, n);
	g_free(n->name);
	g_free(n);
}

static void queue(struct kvt_fs *fs, struct kvt_note *note)
{
	struct kvt_note *n = g_memdup2(note, sizeof(*note));

	memset(note, 0, sizeof(*note));
	if (fs->notifier)
		g_thread_pool_push(fs->notifier->pool, n, NULL);
	else
		run(n, fs);
}

void kvt_notify(struct kvt_fs *fs, struct kvt_note *note, bool sync_entry)
{
	if (!note->parent && !note->child)
		return;
	if (sync_entry && note->name && fs->se) {
		fuse_lowlevel_notify_inval_entry(fs->se, note->parent, note->name,
						 strlen(note->name));
		g_clear_pointer(&note->name, g_free);
	}
	queue(fs, note);
}

void kvt_notify_entry(struct kvt_fs *fs, fuse_ino_t parent, const char *name)
{
	struct kvt_note n = { .parent = parent, .name = g_strdup(name) };

	queue(fs, &n);
}

struct kvt_notifier *kvt_notifier_new(struct kvt_fs *fs)
{
	struct kvt_notifier *n = g_new0(struct kvt_notifier, 1);

	/* One thread: order does not matter.  Not rare: evictions and the
	 * inode budget queue hundreds a second, and a queued note names its
	 * directory by node ID only (performance.md, held invalidations). */
	n->pool = g_thread_pool_new(run, fs, 1, FALSE, NULL);
	return n;
}

void kvt_notifier_free(struct kvt_notifier *n)
{
	if (!n)
		return;
	g_thread_pool_free(n->pool, FALSE, TRUE);
	g_free(n);
}
