#include "purge.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct notification {
	fuse_ino_t parent;
	char *name;
	fuse_ino_t child;
};

/* The visible path of @name in @dir, for the log: the lower directory's
 * path with LOWERDIR/names cut off.  Purges are rare; this costs two
 * readlinks and takes no lock. */
static char *visible_path(struct kvt_fs *fs, struct kvt_inode *dir, const char *name)
{
	char link[64], lower[PATH_MAX], names[PATH_MAX];
	ssize_t n, m;

	if (!dir)
		return g_strdup(name); /* unlinked: no path any more */
	snprintf(link, sizeof(link), "/proc/self/fd/%d", dir->fd);
	n = readlink(link, lower, sizeof(lower) - 1);
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fs->store->namesfd);
	m = readlink(link, names, sizeof(names) - 1);
	if (n < 0 || m < 0)
		return g_strdup(name);
	lower[n] = names[m] = '\0';
	if (strncmp(lower, names, m) || (lower[m] != '/' && lower[m] != '\0'))
		return g_strdup(name);
	return lower[m] ? g_strdup_printf("%s/%s", lower + m + 1, name) : g_strdup(name);
}

static void log_purge(struct kvt_fs *fs, struct kvt_inode *p, const char *name,
		      const struct kvt_record *rec, const struct kvt_torn_info *torn)
{
	g_autofree char *path = visible_path(fs, p, name);
	g_autofree char *obj = rec ? kvt_object_path(rec) : NULL;
	char want[KVT_HASH_HEX_LEN + 1], got[KVT_HASH_HEX_LEN + 1];

	switch (torn->why) {
	case KVT_TORN_RECORD:
		g_warning("purged %s: record names/%s: unparsable record", path, path);
		break;
	case KVT_TORN_MISSING:
		g_warning("purged %s: object %s: missing object: expected %" G_GUINT64_FORMAT
			  ", found none", path, obj, rec->size);
		break;
	case KVT_TORN_SIZE:
	case KVT_TORN_SHORT:
		g_warning("purged %s: object %s: %s: expected %" G_GUINT64_FORMAT
			  ", found %" G_GUINT64_FORMAT, path, obj,
			  torn->why == KVT_TORN_SIZE ? "torn by size" : "short read",
			  rec->size, torn->found_size);
		break;
	case KVT_TORN_HASH:
		kvt_hash_hex(&rec->hash, want);
		kvt_hash_hex(&torn->found_hash, got);
		g_warning("purged %s: object %s: torn by hash: expected xxh3-128:%s, found xxh3-128:%s",
			  path, obj, want, got);
		break;
	}
}

static void count(struct kvt_fs *fs, const struct kvt_torn_info *torn)
{
	static const enum kvt_stat which[] = {
		[KVT_TORN_MISSING] = KVT_STAT_torn_size,
		[KVT_TORN_SIZE] = KVT_STAT_torn_size,
		[KVT_TORN_HASH] = KVT_STAT_torn_hash,
		[KVT_TORN_SHORT] = KVT_STAT_short_reads,
	};

	if (torn->why != KVT_TORN_RECORD)
		kvt_stat_add(&fs->stats, which[torn->why], 1);
	kvt_stat_add(&fs->stats, KVT_STAT_purges, 1);
}

void kvt_purge_locked(struct kvt_fs *fs, struct kvt_inode *p, const char *name,
		      struct kvt_inode *child, const struct kvt_record *rec,
		      const struct kvt_torn_info *torn, struct kvt_purge_note *note)
{
	int ret = kvt_store_purge(fs->store, p->fd, name, rec);

	if (ret < 0)
		g_warning("purge of %s: %s", name, g_strerror(-ret));
	if (rec)
		kvt_verifier_forget(fs->verifier, &rec->hash);
	/* Racing requests find the same torn object: the one that removed
	 * it tells. */
	if (ret != 0) {
		log_purge(fs, p, name, rec, torn);
		count(fs, torn);
	}
	note->parent = kvt_nodeid_of(fs, p);
	note->name = g_strdup(name);
	note->child = 0;
	if (child && !child->is_dir) {
		__atomic_add_fetch(&child->purges, 1, __ATOMIC_RELEASE);
		if (g_hash_table_lookup(p->children, name) == child)
			kvt_inode_detach(child);
		note->child = kvt_nodeid_of(fs, child);
	}
}

void kvt_purge_inode(struct kvt_fs *fs, struct kvt_inode *ino,
		     const struct kvt_record *rec, const struct kvt_torn_info *torn,
		     struct kvt_purge_note *note)
{
	struct kvt_inode *p = kvt_lock_parent(fs, ino);
	bool current = false;

	memset(note, 0, sizeof(*note));
	if (p) {
		g_mutex_lock(&ino->lock);
		current = ino->has_record && !strcmp(ino->rec.ref, rec->ref);
		g_mutex_unlock(&ino->lock);
	}
	if (current) {
		kvt_purge_locked(fs, p, ino->name, ino, rec, torn, note);
	} else {
		/* Renamed over or unlinked meanwhile: the name is no longer
		 * this object's, but the torn object still goes. */
		int ret = kvt_store_purge(fs->store, -1, NULL, rec);

		kvt_verifier_forget(fs->verifier, &rec->hash);
		if (ret != 0) {
			log_purge(fs, p, ino->name, rec, torn);
			count(fs, torn);
		}
		__atomic_add_fetch(&ino->purges, 1, __ATOMIC_RELEASE);
		note->child = kvt_nodeid_of(fs, ino);
	}
	if (p)
		g_mutex_unlock(&p->lock);
}

static void notify(gpointer data, gpointer user)
{
	struct kvt_fs *fs = user;
	struct notification *n = data;

	if (fs->se && n->name)
		fuse_lowlevel_notify_inval_entry(fs->se, n->parent, n->name, strlen(n->name));
	if (fs->se && n->child)
		fuse_lowlevel_notify_inval_inode(fs->se, n->child, 0, 0);
	g_free(n->name);
	g_free(n);
}

void kvt_purge_notify(struct kvt_fs *fs, struct kvt_purge_note *note, bool sync_entry)
{
	struct notification *n;

	if (!note->parent && !note->child)
		return;
	if (sync_entry && note->name && fs->se) {
		fuse_lowlevel_notify_inval_entry(fs->se, note->parent, note->name,
						 strlen(note->name));
		g_clear_pointer(&note->name, g_free);
	}
	n = g_new0(struct notification, 1);
	n->parent = note->parent;
	n->name = g_steal_pointer(&note->name);
	n->child = note->child;
	memset(note, 0, sizeof(*note));
	if (fs->notifier)
		g_thread_pool_push(fs->notifier, n, NULL);
	else
		notify(n, fs);
}

void kvt_notifier_start(struct kvt_fs *fs)
{
	/* One thread: notifications are rare, and order does not matter. */
	fs->notifier = g_thread_pool_new(notify, fs, 1, FALSE, NULL);
}

void kvt_notifier_stop(struct kvt_fs *fs)
{
	if (fs->notifier)
		g_thread_pool_free(g_steal_pointer(&fs->notifier), FALSE, TRUE);
}
