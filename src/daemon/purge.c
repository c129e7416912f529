/* Purging torn names (purge.h). */
#include "purge.h"

#include <stdarg.h>
#include <string.h>

#include "evictor.h"
#include "log.h"
#include "name.h"
#include "object.h"

/* One line in the log, and the same in the ring user.kvtierfs.purges
 * shows, escaped as the log escapes it: a name with a newline makes no
 * line of its own there either. */
static void tell(struct kvt_fs *fs, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

static void tell(struct kvt_fs *fs, const char *fmt, ...)
{
	g_autofree char *msg = NULL, *shown = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	g_warning("%s", msg);
	shown = kvt_log_escape(msg);
	g_mutex_lock(&fs->recent_lock);
	g_free(fs->recent[fs->recent_next]);
	fs->recent[fs->recent_next] = g_strdup_printf("%" G_GINT64_FORMAT " %s",
						      g_get_real_time() / G_USEC_PER_SEC, shown);
	fs->recent_next = (fs->recent_next + 1) % KVT_RECENT_PURGES;
	g_mutex_unlock(&fs->recent_lock);
}

static void log_purge(struct kvt_fs *fs, struct kvt_dir *pd, const char *name,
		      const struct kvt_record *rec, const struct kvt_torn_info *torn)
{
	g_autofree char *dir = pd ? kvt_dir_path_below(pd, kvt_store_names(fs->store)) : NULL;
	g_autofree char *path = dir && dir[0] ? g_strdup_printf("%s/%s", dir, name) :
						g_strdup(name);
	g_autofree char *obj = rec ? kvt_object_path(rec) : NULL;
	char want[KVT_HASH_HEX_LEN + 1], got[KVT_HASH_HEX_LEN + 1];

	switch (torn->why) {
	case KVT_TORN_RECORD:
		tell(fs, "purged %s: record names/%s: unparsable record", path, path);
		break;
	case KVT_TORN_MISSING:
		tell(fs, "purged %s: object %s: missing object: expected %" G_GUINT64_FORMAT
		     ", found none", path, obj, rec->size);
		break;
	case KVT_TORN_SIZE:
	case KVT_TORN_SHORT:
		tell(fs, "purged %s: object %s: %s: expected %" G_GUINT64_FORMAT
		     ", found %" G_GUINT64_FORMAT, path, obj,
		     torn->why == KVT_TORN_SIZE ? "torn by size" : "short read",
		     rec->size, torn->found_size);
		break;
	case KVT_UNSYNCED:
		tell(fs, "unpublished %s: object %s: its sync failed (-o sync): %s", path, obj,
		     g_strerror(torn->err));
		break;
	case KVT_TORN_HASH:
		kvt_hash_hex(&rec->hash, want);
		kvt_hash_hex(&torn->found_hash, got);
		tell(fs, "purged %s: object %s: torn by hash: expected xxh3-128:%s, found xxh3-128:%s",
		     path, obj, want, got);
		break;
	}
}

GString *kvt_purges_format(struct kvt_fs *fs, bool paths)
{
	GString *s = g_string_new(NULL);

	g_mutex_lock(&fs->recent_lock);
	for (guint i = 0; i < KVT_RECENT_PURGES; i++) {
		const char *line = fs->recent[(fs->recent_next + i) % KVT_RECENT_PURGES];

		if (!line)
			continue;
		if (paths)
			g_string_append_printf(s, "%s\n", line);
		else /* the time only: "<unix seconds> " */
			g_string_append_printf(s, "%.*s%s\n", (int)strcspn(line, " ") + 1, line,
					       KVT_PURGE_WITHHELD);
	}
	g_mutex_unlock(&fs->recent_lock);
	return s;
}

static void count(struct kvt_fs *fs, const struct kvt_torn_info *torn)
{
	static const enum kvt_stat which[] = {
		[KVT_TORN_MISSING] = KVT_STAT_torn_size,
		[KVT_TORN_SIZE] = KVT_STAT_torn_size,
		[KVT_TORN_HASH] = KVT_STAT_torn_hash,
		[KVT_TORN_SHORT] = KVT_STAT_short_reads,
	};

	if (torn->why == KVT_UNSYNCED)
		return; /* the sync's failure counts as a lower error */
	if (torn->why != KVT_TORN_RECORD)
		kvt_stat_add(&fs->stats, which[torn->why], 1);
	kvt_stat_add(&fs->stats, KVT_STAT_purges, 1);
}

/* Racing requests find the same torn object: the one that removed it
 * tells.  Returns @removed. */
static int report(struct kvt_fs *fs, int removed, struct kvt_dir *pd, const char *name,
		  const struct kvt_record *rec, const struct kvt_torn_info *torn)
{
	if (removed < 0)
		g_warning("purge of %s: %s", name, g_strerror(-removed));
	if (rec)
		kvt_verifier_forget(fs->verifier, &rec->hash);
	if (removed != 0) {
		log_purge(fs, pd, name, rec, torn);
		count(fs, torn);
	}
	return removed;
}

void kvt_purge_locked(struct kvt_fs *fs, struct kvt_inode *p, struct kvt_dir *pd,
		      const char *name, struct kvt_inode *child,
		      const struct kvt_record *rec, const struct kvt_torn_info *torn,
		      struct kvt_note *note)
{
	/* Bytes whose sync failed go, intact or not: they are not known to
	 * be on the disk, and no store may share them. */
	int removed = report(fs, kvt_name_purge(fs->store, pd, name, rec, torn->why != KVT_UNSYNCED),
			     pd, name, rec, torn);

	note->parent = kvt_nodeid_of(fs, p);
	note->name = g_strdup(name);
	note->child = 0;
	if (child && !child->is_dir) {
		if (removed)
			kvt_evictor_forget(fs->store, child->rec_ino);
		/* Handles opened before fail from now on; not when another
		 * request had purged it already, or nothing was torn. */
		if (removed)
			__atomic_add_fetch(&child->purges, 1, __ATOMIC_RELEASE);
		if (g_hash_table_lookup(p->children, name) == child)
			kvt_inode_detach(child);
		note->child = kvt_nodeid_of(fs, child);
	}
}

void kvt_purge_inode(struct kvt_fs *fs, struct kvt_inode *ino,
		     const struct kvt_record *rec, const struct kvt_torn_info *torn,
		     struct kvt_note *note)
{
	struct kvt_dir *pd = NULL;
	struct kvt_inode *p;
	bool current = false;
	int err;

	memset(note, 0, sizeof(*note));
	p = kvt_lock_parent(fs, ino, &pd, &err);
	if (p) {
		kvt_inode_lock(ino);
		current = ino->has_record && !strcmp(ino->rec.ref, rec->ref);
		kvt_inode_unlock(ino);
	}
	if (current) {
		kvt_purge_locked(fs, p, pd, ino->name, ino, rec, torn, note);
	} else if (torn->why != KVT_UNSYNCED) {
		/* Renamed over or unlinked meanwhile: the name is no longer
		 * this object's, but the torn object still goes. */
		if (report(fs, kvt_name_purge(fs->store, NULL, NULL, rec, true), pd, ino->name, rec,
			   torn)) {
			__atomic_add_fetch(&ino->purges, 1, __ATOMIC_RELEASE);
			note->child = kvt_nodeid_of(fs, ino);
		}
	}
	if (p)
		kvt_inode_unlock(p);
	kvt_dir_unref(pd);
}

void kvt_unpublish(struct kvt_fs *fs, struct kvt_inode *ino, const struct kvt_record *rec,
		   int err, fuse_ino_t old_parent, const char *old_name)
{
	struct kvt_torn_info why = { .why = KVT_UNSYNCED, .err = -err };
	struct kvt_note note;

	/* The name replaced or removed since: nothing of this publication
	 * is left to take back. */
	kvt_purge_inode(fs, ino, rec, &why, &note);
	/* Queued: a rename's reply waits with the directories locked. */
	kvt_notify(fs, &note, false);
	if (old_parent)
		kvt_notify_entry(fs, old_parent, old_name);
}
