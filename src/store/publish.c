/* The publication transaction (publish.h).
 *
 * Steps, each one atomic operation on the lower directory:
 *   1. the version's bytes are in staging/<id>/d.<n> (stage.h); sealing it
 *      stops its writers and fixes its hash;
 *   2. object: a link anchor -> new reference (the same bytes are stored
 *      already: dedup), or a link staged file -> reference (new bytes);
 *   3. name: the record, written to staging/<id>/n.<n>, is renamed onto
 *      the name (RENAME_NOREPLACE, or RENAME_EXCHANGE to learn exactly
 *      which record it replaced);
 *   4. the staged file goes; then new bytes get their anchor, a link
 *      reference -> anchor (object.h says why not earlier); and the
 *      replaced record's reference goes.
 * Steps 1-2 and the record of 3 are made before the caller's locks
 * (kvt_publication_prepare), 3 under them (kvt_publication_install), 4
 * after (kvt_publication_finish): on a network file system each step is a
 * round trip, and the locks are held for one.
 * If 3 fails (ENOSPC for the record), the reference of 2 goes again and
 * the version is open again with its bytes intact: the rename or close
 * that asked fails, and a retry publishes the same bytes.
 *
 * Crash analysis (kill -9 of the daemon; the page cache survives):
 *   - before 3: the name is untouched (absent, or the old record); the
 *     staged file and, after 2, a reference that no record names remain.
 *     The next mount removes the dead staging directory; the reference is
 *     an orphan, which a reclamation pass removes (reclaim.c), as
 *     kvtierfs-fsck --repair does.
 *   - after 3: the name is the new record and points at a complete
 *     object.  The staged file may remain (the next mount removes it
 *     with the dead staging), new bytes may have no anchor (they are not
 *     shared: nothing is wrong), and at worst the replaced record's object
 *     is left unreferenced, an orphan.
 *   No step ever leaves a name pointing at a partial object.
 *
 * Several mounts (also on several hosts) share LOWERDIR with no lock
 * between them but what the lower file system gives: atomic rename, link
 * and unlink.  So, between two steps of this mount, another may replace
 * the record just installed (its RENAME_EXCHANGE hands it exactly our
 * record) and release its reference; that is why the anchor waits for the
 * staged file to go: a reference removed while the staged link still
 * counts would leave an anchor that neither mount removes (object.h).
 * And a reader that read a record may find its object gone: the record
 * was replaced meanwhile, and the name is read again (kvt_name_lookup)
 * instead of answering that it does not exist.  No mount removes an
 * object that a record uses: a reference goes only with its record off
 * the name (or as torn, kvt_name_purge), the anchor only when no
 * reference is left.
 *
 * Durability.  By default nothing is synced: the clients of a KV-cache
 * tier never call fsync, and a block lost at a power cut is recomputed,
 * while a sync per block would cost the store its speed.  So after a power
 * cut a record may survive while its object's bytes do not, or with no
 * bytes of its own: the size check at resolve, the hash check before
 * serving and the record's parser catch that, and the name vanishes
 * instead of serving torn bytes.  The store's own skeleton (its marker and
 * areas, layout.c, and each fan-out directory, object.c) is synced when it
 * is made.
 *
 * A client's fsync or fdatasync of a published file asks for more: when
 * it returns, the name must survive a power cut with its bytes.
 * kvt_store_sync_name then syncs, in order, the object's bytes and its
 * fan-out directory (the reference and anchor links), the record file, and
 * the record's directory and each one above it up to names/ (a directory
 * made since the last sync holds the path to the name).  A client's fsync
 * of a directory (after renames into it) gets the same for every name in
 * it that the caller wants (the daemon: the client's own; root's, all),
 * kvt_store_sync_dir: its fsync of a temp file could not make bytes
 * durable that become an object only at the rename.
 *
 * -o sync asks it of every publication, before the rename or the close
 * that publishes returns, in three parts so that no journal commit is
 * waited for under a lock (the rename of a temp file holds the tree lock:
 * a commit there would serialize every store; measured, it cost 85% of
 * the store rate, docs/performance.md):
 *   1. before the caller's locks, kvt_stage_sync: the staged bytes;
 *   2. in the preparation (KVT_PUBLISH_SYNC), before the locks too: the
 *      object's bytes if a write came after 1 or the bytes are another
 *      object's (dedup), and the record's bytes written out
 *      (sync_file_range, no commit) before it is renamed onto the name, so
 *      that the name holds the old record or the new one, never an empty
 *      file;
 *   3. after the locks, kvt_store_sync_published: the record, the fan-out
 *      directory and the directories from the record's up to names/.
 * So with -o sync a name on the disk never points at bytes that are not
 * there, whenever the power goes: after a cut there is no torn name, only
 * names whose publication had not returned yet (before 3), and orphans.
 * This relies on the lower file system keeping the order of its metadata
 * changes (a journal: ext4, xfs): the reference link of step 2 and the
 * record's allocation reach the disk no later than the record's rename. */
#include "publish.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "evictor.h"
#include "log.h"
#include "object.h"
#include "name.h"
#include "store-int.h"
#include "usage.h"

void kvt_published_clear(struct kvt_published *p)
{
	kvt_record_clear(&p->rec);
	kvt_record_clear(&p->replaced);
	memset(p, 0, sizeof(*p));
}

/* Step 2 of -o sync: the bytes the new object holds are durable (the
 * staged ones, normally synced before the locks; or, deduplicated, the
 * existing object's, which another publication may not have synced). */
static int sync_bytes(struct kvt_store *s, struct kvt_stage *st, bool dedup,
		      const struct kvt_record *rec)
{
	if (dedup)
		return kvt_object_sync(s, rec);
	if (!kvt_stage_durable(st))
		return kvt_file_datasync(st->fd, st->name);
	return 0;
}

int kvt_publication_prepare(struct kvt_store *s, struct kvt_stage *st,
			    const struct kvt_meta *meta, GHashTable *xattrs,
			    unsigned int flags, struct kvt_publication *p)
{
	kvt_hash hash;
	int ret;

	memset(p, 0, sizeof(*p));
	p->sync = flags & KVT_PUBLISH_SYNC;
	p->meta = *meta;
	ret = kvt_stage_seal(st, &hash, &p->size);
	if (ret != 0)
		return ret;
	ret = kvt_object_make(s, st->name, st->fd, p->size, &hash, &p->rec, &p->dedup);
	if (ret < 0)
		goto reopen;
	if (p->sync)
		ret = sync_bytes(s, st, p->dedup, &p->rec);
	if (ret == 0 && xattrs && g_hash_table_size(xattrs)) {
		p->xattrs = g_hash_table_ref(xattrs);
		p->rec.xattrs = kvt_xattrs_dup(xattrs);
	}
	kvt_meta_apply(meta, &p->rec);
	/* Into the stage's own record file: the number the file showed
	 * while pending stays its number once published.  It stays the
	 * stage's until installed. */
	if (ret == 0)
		ret = kvt_name_stage_into(&p->rec, meta, p->sync, st->record_fd, st->record,
					  &st->record_st, &st->record_dirty);
	if (ret < 0) {
		kvt_object_unmake(s, &p->rec, p->dedup);
		goto reopen;
	}
	p->record = g_strdup(st->record);
	p->record_ino = st->record_st.st_ino;
	p->st = kvt_stage_ref(st);
	return 0;
reopen:
	kvt_stage_unseal(st);
	g_clear_pointer(&p->xattrs, g_hash_table_unref);
	kvt_record_clear(&p->rec);
	return ret;
}

bool kvt_publication_matches(const struct kvt_publication *p, const struct kvt_meta *meta,
			     GHashTable *xattrs)
{
	return (p->meta.mode & 07777) == (meta->mode & 07777) && p->meta.uid == meta->uid &&
	       p->meta.gid == meta->gid && p->meta.set_times == meta->set_times &&
	       (!meta->set_times ||
		(!memcmp(&p->meta.atime, &meta->atime, sizeof(meta->atime)) &&
		 !memcmp(&p->meta.mtime, &meta->mtime, sizeof(meta->mtime)))) &&
	       kvt_xattrs_equal(p->xattrs, xattrs);
}

int kvt_publication_install(struct kvt_store *s, struct kvt_publication *p,
			    struct kvt_dir *d, const char *name, struct kvt_published *out)
{
	struct kvt_record old;
	int ret;

	memset(out, 0, sizeof(*out));
	ret = kvt_name_place(s, p->record, d, name, &old, &p->record_left);
	if (ret < 0)
		return ret;
	if (!p->record_left)
		g_clear_pointer(&p->record, g_free);
	kvt_stage_set_published(p->st);
	kvt_record_copy(&out->rec, &p->rec);
	out->dedup = p->dedup;
	/* The replaced record, unless it is the one just published (a
	 * record rewritten in place). */
	if (old.ref[0] && strcmp(old.ref, p->rec.ref))
		out->replaced = old;
	else
		kvt_record_clear(&old);
	/* What the name shows of the record is looked at once the caller's
	 * locks are let go (kvt_publication_finish). */
	out->rec_ino = p->record_ino;
	if (kvt_log_debug_on()) {
		g_autofree char *path = kvt_name_path(s, d, name);
		g_autofree char *obj = kvt_object_path(&p->rec);

		g_debug("published %s: %" G_GUINT64_FORMAT " bytes, %s%s", path, p->size, obj,
			p->dedup ? " (already stored)" : "");
	}
	return 0;
}

static void publication_clear(struct kvt_publication *p)
{
	g_clear_pointer(&p->st, kvt_stage_unref);
	g_clear_pointer(&p->xattrs, g_hash_table_unref);
	g_clear_pointer(&p->record, g_free);
	kvt_record_clear(&p->rec);
}

void kvt_publication_finish(struct kvt_store *s, struct kvt_publication *p,
			    struct kvt_dir *d, const char *name, struct kvt_published *out,
			    bool keep_replaced)
{
	if (p->record_left)
		kvt_dir_unlink(s->stage, p->record);
	/* The record's identity, for a later resolve to know it unchanged
	 * (after the unlink above, which changes its ctime).  The object's
	 * is taken when it is next resolved or opened: not here, where on a
	 * network file system it is a round trip more per store. */
	if (kvt_dir_stat(d, name, &out->rec_st) < 0 || out->rec_st.st_ino != p->record_ino)
		memset(&out->rec_st, 0, sizeof(out->rec_st));
	else
		kvt_evictor_stored(s, d, name, out->rec_st.st_ino, p->rec.size);
	/* New bytes get their anchor only once the staged file's link is
	 * gone (object.h): while it counts, a release by another mount (or
	 * by this one) keeps an anchor that nobody removes afterwards.  If
	 * it stays, these bytes are not shared. */
	if (kvt_dir_unlink(s->stage, p->st->name) == 0 && !p->dedup)
		kvt_object_anchor(s, &p->rec, p->st->fd);
	if (!keep_replaced && out->replaced.ref[0]) {
		kvt_object_release(s, &out->replaced);
		kvt_record_clear(&out->replaced);
	}
	publication_clear(p);
}

void kvt_publication_abort(struct kvt_store *s, struct kvt_publication *p)
{
	if (!p->st)
		return;
	/* The record file stays the stage's, written again by the next
	 * publication. */
	g_clear_pointer(&p->record, g_free);
	kvt_object_unmake(s, &p->rec, p->dedup);
	kvt_stage_unseal(p->st);
	publication_clear(p);
}

int kvt_store_publish(struct kvt_store *s, struct kvt_stage *st, struct kvt_dir *d,
		      const char *name, const struct kvt_meta *meta, GHashTable *xattrs,
		      unsigned int flags, struct kvt_published *out)
{
	struct kvt_publication p;
	bool was = kvt_usage_set_nowait(true);
	int ret = kvt_publication_prepare(s, st, meta, xattrs, flags, &p);

	kvt_usage_set_nowait(was);
	memset(out, 0, sizeof(*out));
	if (ret != 0)
		return ret;
	ret = kvt_publication_install(s, &p, d, name, out);
	if (ret < 0) {
		kvt_publication_abort(s, &p);
		return ret;
	}
	kvt_publication_finish(s, &p, d, name, out, flags & KVT_PUBLISH_KEEP_REPLACED);
	return 0;
}

int kvt_store_rewrite(struct kvt_store *s, struct kvt_dir *d, const char *name,
		      const struct kvt_record *rec, const struct kvt_meta *meta,
		      struct stat *rec_st)
{
	char *marker = NULL;
	int ret;

	/* A new record file naming an existing reference takes the name's
	 * place in its directory, maybe another place in a listing: a move
	 * (reclaim.c). */
	ret = kvt_store_move_begin(s, &marker);
	if (ret < 0)
		return ret;
	ret = kvt_name_rewrite(s, d, name, rec, meta, rec_st);
	kvt_store_move_end(s, marker);
	return ret;
}

int kvt_store_sync_name(struct kvt_store *s, struct kvt_dir *d, const char *name,
			const struct kvt_record *rec)
{
	kvt_autofd fd = -1;
	int ret = kvt_object_sync(s, rec);

	if (ret < 0)
		return ret;
	fd = kvt_dir_open_file(d, name, O_RDONLY, 0, NULL);
	if (fd < 0)
		return fd;
	ret = kvt_file_sync(fd, name);
	if (ret < 0)
		return ret;
	return kvt_dir_sync_up(d, s->layout.names);
}

int kvt_store_sync_published(struct kvt_store *s, struct kvt_dir *d, const char *name,
			     const struct kvt_record *rec)
{
	kvt_autofd fd = kvt_dir_open_file(d, name, O_RDONLY, 0, NULL);
	int ret;

	/* Gone or replaced since (an unlink, another publication): what is
	 * there now is made durable, or nothing. */
	ret = fd >= 0 ? kvt_file_sync(fd, name) : 0;
	if (ret < 0)
		return ret;
	if (fd < 0 && fd != -ENOENT)
		return fd;
	ret = kvt_object_sync_links(s, rec);
	return ret < 0 ? ret : kvt_dir_sync_up(d, s->layout.names);
}

int kvt_store_sync_dir(struct kvt_store *s, struct kvt_dir *d, kvt_sync_wanted wanted,
		       void *data)
{
	int ret;
	g_autoptr(GPtrArray) ents = kvt_dir_list(d, false, &ret);

	if (!ents)
		return ret;
	for (guint i = 0; i < ents->len; i++) {
		const struct kvt_dirent *e = ents->pdata[i];
		struct kvt_record rec;
		struct stat st;

		if (e->type != DT_REG && e->type != DT_UNKNOWN)
			continue;
		ret = kvt_name_read(d, e->name, &rec, &st);
		if (ret == 0)
			kvt_record_show(&rec, &st); /* the name's owner, not the file's */
		/* Gone meanwhile, a subdirectory, or torn (a resolve purges
		 * it): nothing of it to make durable.  Or not the caller's
		 * to ask for: its entry is made durable with the directory,
		 * its bytes by its owner's fsync. */
		if (ret == -ENOENT || ret == -EBADMSG || ret == -EISDIR ||
		    (ret == 0 && wanted && !wanted(&rec, &st, data))) {
			kvt_record_clear(&rec);
			continue;
		}
		if (ret == 0) {
			ret = kvt_object_sync(s, &rec);
			if (ret == -ENOENT)
				ret = 0;
		}
		if (ret == 0) {
			kvt_autofd fd = kvt_dir_open_file(d, e->name, O_RDONLY, 0, NULL);

			if (fd >= 0)
				ret = kvt_file_sync(fd, e->name);
		}
		kvt_record_clear(&rec);
		if (ret < 0)
			return ret;
	}
	return kvt_dir_sync_up(d, s->layout.names);
}
