/* A file's versions as the daemon sees them: which version a writer
 * writes, when one is published (the rename of its temp name, the first
 * FLUSH or fsync), and the publication's steps around the inode locks,
 * prepared, installed and finished or aborted through the store
 * (publish.h) (version.h). */
#include "version.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "object.h"
#include "purge.h"
#include "resolve.h"

struct kvt_meta kvt_inode_meta(const struct kvt_inode *ino, bool set_times)
{
	struct kvt_meta m = {
		.mode = ino->meta.st_mode,
		.uid = ino->meta.st_uid,
		.gid = ino->meta.st_gid,
		.set_times = set_times,
		.atime = ino->meta.st_atim,
		.mtime = ino->meta.st_mtim,
	};
	return m;
}

/* A new stage holding the published object's first @keep bytes
 * (copy-on-write of a published file opened for writing), counted
 * against @uid. */
static int new_version(struct kvt_fs *fs, struct kvt_inode *ino, uint64_t keep, uid_t uid,
		       struct kvt_stage **out)
{
	struct kvt_verify_result res;
	struct kvt_stage *st;
	struct stat sst;
	kvt_autofd src = -1;
	int ret;

	ret = kvt_bounds_stage_new(fs, uid, &st);
	if (ret < 0 || !keep || !ino->has_record) {
		*out = ret < 0 ? NULL : st;
		return ret;
	}
	ret = kvt_bounds_stage_grow(fs, st, MIN(keep, ino->rec.size));
	src = ret < 0 ? ret : kvt_object_open(fs->store, &ino->rec, O_RDONLY, &sst);
	if (src < 0)
		ret = src;
	else if (kvt_verify_fd(fs->verifier, src, &sst, &ino->rec, fs->verify_always, &res) < 0)
		/* A new version must not be built on torn bytes; the next
		 * open for reading purges them. */
		ret = -EIO;
	else
		ret = kvt_stage_fill(st, src, MIN(keep, ino->rec.size));
	if (ret < 0) {
		kvt_stage_unref(st);
		return ret;
	}
	*out = st;
	return 0;
}

/* How long after its ESTALE a thread's next change counts as the
 * kernel's retry.  The retry comes at once, but its lookup is a round
 * trip on a network file system, and on a loaded one it took more than a
 * second: a second ESTALE then went to the client (the kernel retries
 * once).  A thread whose retry never came here waits for the readers,
 * at its next change within the window, instead of being sent away. */
#define TOLD_WINDOW_US (10 * G_TIME_SPAN_SECOND)

/* Whether thread @tid was told ESTALE by kvt_version_room within
 * TOLD_WINDOW_US (this call is the kernel's retry), forgetting it; if
 * not, and @tell, it is now. */
static bool told_before(struct kvt_fs *fs, pid_t tid, bool tell)
{
	gint64 now = g_get_monotonic_time();
	bool told = false;

	g_mutex_lock(&fs->told_lock);
	for (guint i = 0; i < KVT_TOLD_STALE && !told; i++) {
		if (fs->told[i].at && fs->told[i].tid == tid &&
		    now - fs->told[i].at < TOLD_WINDOW_US) {
			fs->told[i].at = 0;
			told = true;
		}
	}
	if (!told && tell) {
		fs->told[fs->told_next].tid = tid;
		fs->told[fs->told_next].at = now;
		fs->told_next = (fs->told_next + 1) % KVT_TOLD_STALE;
	}
	g_mutex_unlock(&fs->told_lock);
	return told;
}

/* How long a retried change waits for the readers of the page cache. */
#define ROOM_WAIT_US (10 * G_TIME_SPAN_SECOND)

int kvt_version_room(struct kvt_fs *fs, struct kvt_inode *ino, pid_t tid, uid_t uid)
{
	gint64 until;

	if (!ino->has_record)
		return 0;
	/* Readers that open it from now on do not read by the kernel's size,
	 * which the change is to move. */
	ino->rewritten = true;
	if (ino->cache_readers == 0) {
		told_before(fs, tid, false); /* a retry that found room */
		return 0;
	}
	if (!told_before(fs, tid, true)) {
		ino->renew = true;
		return -ESTALE;
	}
	/* The wait holds a FUSE thread: one user may not hold them all. */
	if (!kvt_bounds_wait_begin(fs, uid, "a change in place waiting for readers"))
		return -EBUSY;
	until = g_get_monotonic_time() + ROOM_WAIT_US;
	while (ino->cache_readers > 0 && g_cond_wait_until(&ino->published, &ino->lock, until))
		;
	kvt_bounds_wait_end(fs, uid);
	if (ino->cache_readers > 0) {
		g_warning("a change of file %" G_GUINT64_FORMAT " in place waited %d s for its "
			  "readers of the page cache to close: EBUSY", ino->st_ino,
			  (int)(ROOM_WAIT_US / G_TIME_SPAN_SECOND));
		return -EBUSY;
	}
	/* It is changed in place after all: no new inode for its name. */
	ino->renew = false;
	return 0;
}

int kvt_version_begin(struct kvt_fs *fs, struct kvt_inode *ino, bool trunc, uid_t uid,
		      bool *ref_inode, struct kvt_stage **out)
{
	struct kvt_stage *st;
	int ret;

	*ref_inode = false;
	if (!trunc && kvt_inode_pending(ino)) {
		*out = kvt_stage_ref(ino->stage);
		return 0;
	}
	/* Being published right now: the next version starts from what that
	 * publication ends with. */
	if (!trunc && ino->stage)
		return -EAGAIN;
	ret = new_version(fs, ino, trunc ? 0 : UINT64_MAX, uid, &st);
	if (ret < 0)
		return ret;
	if (ino->has_record)
		ino->rewritten = true;
	if (ino->stage)
		kvt_stage_unref(ino->stage);
	else
		*ref_inode = true;
	ino->stage = st;
	*out = kvt_stage_ref(st);
	return 0;
}

int kvt_version_for_write(struct kvt_fs *fs, struct kvt_inode *ino, uid_t uid,
			  struct kvt_stage **wstage, struct kvt_stage **out, bool *joined)
{
	int looks = 0;

	for (;;) {
		struct kvt_stage *st = NULL;
		bool ref_inode = false, pending = false;
		int ret = 0;

		kvt_inode_lock(ino);
		if (wstage && *wstage && kvt_stage_state(*wstage) == KVT_STAGE_OPEN) {
			st = kvt_stage_ref(*wstage);
			pending = true;
		} else {
			while ((pending = kvt_inode_pending(ino),
				ret = kvt_version_begin(fs, ino, false, uid, &ref_inode, &st)) == -EAGAIN)
				g_cond_wait_until(&ino->published, &ino->lock,
						  g_get_monotonic_time() + G_TIME_SPAN_SECOND);
		}
		if (joined)
			*joined = pending;
		if (ret == 0 && wstage && *wstage != st) {
			kvt_stage_unref(*wstage);
			*wstage = kvt_stage_ref(st);
		}
		kvt_inode_unlock(ino);
		if (ref_inode)
			kvt_inode_ref(ino);
		if (ret == -ENOENT && looks++ < 8) {
			/* The published version's object went with its
			 * record: another mount replaced it since this one
			 * looked.  The new version starts from what the name
			 * holds now. */
			struct kvt_note note = { 0 };

			ret = kvt_resolve_inode(fs, ino, &note);
			kvt_notify(fs, &note, true);
			if (ret == 0)
				continue;
		}
		if (ret < 0)
			return ret;
		kvt_lock_note(KVT_RANK_STAGE, &st->io);
		g_rw_lock_reader_lock(&st->io);
		if (kvt_stage_state(st) == KVT_STAGE_OPEN) {
			*out = st;
			return 0;
		}
		kvt_version_put(st);
	}
}

void kvt_version_put(struct kvt_stage *st)
{
	g_rw_lock_reader_unlock(&st->io);
	kvt_lock_unnote(&st->io);
	kvt_stage_unref(st);
}

void kvt_version_wake(struct kvt_inode *ino)
{
	kvt_inode_lock(ino);
	g_cond_broadcast(&ino->published);
	kvt_inode_unlock(ino);
}

bool kvt_version_published(struct kvt_fs *fs, struct kvt_inode *ino,
			   struct kvt_published *pub, bool in_place)
{
	struct kvt_record rec;
	struct stat rst;
	bool drop = false;

	kvt_stat_add(&fs->stats, KVT_STAT_stores, 1);
	kvt_inode_lock(ino);
	/* Written under its own name: the next version will be too, and its
	 * writer moves the kernel's size under readers (see file.c). */
	if (in_place)
		ino->rewritten = true;
	if (ino->stage && kvt_stage_state(ino->stage) == KVT_STAGE_PUBLISHED) {
		kvt_bounds_stage_published(fs, ino->stage);
		g_clear_pointer(&ino->stage, kvt_stage_unref);
		drop = true;
	}
	if (pub->rec_st.st_ino) {
		rst = pub->rec_st;
	} else {
		/* Until kvt_version_settle: the number is the record's, the
		 * rest what the file showed. */
		rst = ino->meta;
		rst.st_ino = pub->rec_ino;
	}
	rst.st_mode = S_IFREG | (ino->meta.st_mode & 07777);
	/* A publication is no change the client made: ctime stays that of
	 * its last write or setattr (tar extracts a symbolic link over the
	 * placeholder file it made only if the file's ctime did not move). */
	rst.st_ctim = ino->meta.st_ctim;
	/* A copy: kvt_version_settle compares pub->rec afterwards. */
	kvt_record_init(&rec);
	kvt_record_copy(&rec, &pub->rec);
	kvt_inode_take_record(ino, &rec, &rst, NULL);
	kvt_bounds_xattr_settle(fs, ino); /* the record holds them now */
	ino->rec_ctime = pub->rec_st.st_ctim;
	ino->times_set = 0;
	kvt_inode_unlock(ino);
	return drop;
}

void kvt_version_settle(struct kvt_inode *ino, const struct kvt_published *pub)
{
	if (!pub->rec_st.st_ino)
		return;
	kvt_inode_lock(ino);
	/* Unless the inode took another record since. */
	if (ino->has_record && ino->rec_ino == pub->rec_st.st_ino &&
	    !strcmp(ino->rec.ref, pub->rec.ref)) {
		struct stat rst = pub->rec_st;

		rst.st_mode = S_IFREG | (ino->meta.st_mode & 07777);
		kvt_record_show(&ino->rec, &rst);
		rst.st_ctim = ino->meta.st_ctim; /* see kvt_version_published */
		ino->rec_ctime = pub->rec_st.st_ctim;
		ino->meta = rst;
	}
	kvt_inode_unlock(ino);
}

/* Locks @ino's parent, unless @ino is gone or has a temp name (published
 * by its rename only); *@ret says why not. */
static struct kvt_inode *lock_parent_to_publish(struct kvt_fs *fs, struct kvt_inode *ino,
						struct kvt_dir **pd, int *ret)
{
	struct kvt_inode *p = kvt_lock_parent(fs, ino, pd, ret);

	if (p && kvt_is_tmp_name(fs, ino->name)) {
		kvt_inode_unlock(p);
		g_clear_pointer(pd, kvt_dir_unref);
		return NULL;
	}
	return p;
}

/* What a record of @ino's version says of it as of now: its metadata,
 * and a copy of its xattrs (NULL: none). */
static void version_meta(struct kvt_inode *ino, struct kvt_meta *meta, GHashTable **xattrs)
{
	kvt_inode_lock(ino);
	*meta = kvt_inode_meta(ino, ino->times_set != 0);
	/* A time the client did not set is the publication's. */
	if (!(ino->times_set & KVT_CLIENT_ATIME))
		meta->atime.tv_nsec = UTIME_OMIT;
	if (!(ino->times_set & KVT_CLIENT_MTIME))
		meta->mtime.tv_nsec = UTIME_OMIT;
	*xattrs = ino->rec.xattrs ? kvt_xattrs_dup(ino->rec.xattrs) : NULL;
	kvt_inode_unlock(ino);
}

int kvt_version_prepare(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_stage *st,
			struct kvt_publication *prep)
{
	struct kvt_meta meta;
	g_autoptr(GHashTable) xattrs = NULL;

	version_meta(ino, &meta, &xattrs);
	return kvt_publication_prepare(fs->store, st, &meta, xattrs,
				       fs->sync ? KVT_PUBLISH_SYNC : 0, prep);
}

int kvt_version_install(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_stage *st,
			struct kvt_publication *prep, struct kvt_dir *d, const char *name,
			unsigned int flags, struct kvt_published *out)
{
	struct kvt_meta meta;
	g_autoptr(GHashTable) xattrs = NULL;

	version_meta(ino, &meta, &xattrs);
	if (prep->st && !kvt_publication_matches(prep, &meta, xattrs)) {
		/* A chmod or setxattr through an open descriptor since the
		 * record was written: it is written again. */
		g_debug("%s: its metadata changed since its record was written", name);
		kvt_publication_abort(fs->store, prep);
	}
	if (prep->st)
		return kvt_publication_install(fs->store, prep, d, name, out);
	return kvt_store_publish(fs->store, st, d, name, &meta, xattrs,
				 flags | (fs->sync ? KVT_PUBLISH_SYNC : 0), out);
}

/* Makes @st's object and record before the parent is locked (publish.h):
 * on a network file system each is a round trip, and the directory's lock,
 * held for them, made every close in the directory (LMCache writes all its
 * files in one) wait for the one before.  Another call publishing @st
 * meanwhile (a close of another descriptor, a rename) is waited for, so
 * that a close returns once its bytes are published, as it did when it
 * waited for the directory's lock.  1: nothing left to publish. */
static int prepare_in_place(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_stage *st,
			    struct kvt_publication *prep)
{
	for (;;) {
		int ret = kvt_version_prepare(fs, ino, st, prep);

		if (ret <= 0)
			return ret;
		kvt_inode_lock(ino);
		while (kvt_stage_state(st) == KVT_STAGE_SEALED)
			g_cond_wait_until(&ino->published, &ino->lock,
					  g_get_monotonic_time() + G_TIME_SPAN_SECOND);
		kvt_inode_unlock(ino);
		/* Open again: that publication failed, and this one is tried. */
		if (kvt_stage_state(st) != KVT_STAGE_OPEN)
			return 1;
	}
}

int kvt_publish_in_place(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_stage *st)
{
	g_autofree char *name = NULL;
	struct kvt_publication prep = { 0 };
	struct kvt_published pub;
	struct kvt_record id;
	struct kvt_inode *p;
	struct kvt_dir *pd;
	bool drop = false, remade = false;
	int ret, sret = 0;

	p = lock_parent_to_publish(fs, ino, &pd, &ret);
	if (!p)
		return ret; /* unlinked while open, or a temp name: nothing */
	kvt_inode_unlock(p);
	kvt_dir_unref(pd);

	kvt_inode_lock(ino);
	st = st ? kvt_stage_ref(st) : ino->stage ? kvt_stage_ref(ino->stage) : NULL;
	kvt_inode_unlock(ino);
	if (!st)
		return 0;
	/* Any hashing left, and with -o sync the bytes' sync, are done
	 * before the directory is locked. */
	ret = kvt_stage_prepare(st);
	if (ret == 0 && fs->sync)
		ret = kvt_stage_sync(st);
	if (ret == 0)
		ret = prepare_in_place(fs, ino, st, &prep);
	if (ret > 0) {
		kvt_stage_unref(st);
		return 0;
	}
again:
	p = ret < 0 ? NULL : lock_parent_to_publish(fs, ino, &pd, &ret);
	if (!p) {
		/* Failed (an orphan now, see kvt_version_set_size), gone,
		 * or renamed to a temp name meanwhile: its rename
		 * publishes it. */
		kvt_publication_abort(fs->store, &prep);
		kvt_version_wake(ino);
		if (ret < 0)
			__atomic_store_n(&st->orphan, true, __ATOMIC_RELEASE);
		kvt_stage_unref(st);
		return ret;
	}
	ret = kvt_version_install(fs, ino, st, &prep, pd, ino->name, 0, &pub);
	if ((ret == -ENOENT || ret == -ESTALE) && !remade && p != fs->root &&
	    kvt_dir_gone(pd)) {
		/* Another mount removed the directory (an evictor's rmdir of
		 * an empty one): made again, the publication is made again.
		 * The file's inode holds its parent meanwhile. */
		struct kvt_dir *d = NULL;

		kvt_inode_unlock(p);
		g_clear_pointer(&pd, kvt_dir_unref);
		remade = true;
		ret = kvt_inode_dir_remake(fs, p, &d);
		kvt_dir_unref(d);
		goto again;
	}
	if (ret == 0) {
		kvt_record_id(&id, &pub.rec);
		kvt_bounds_stage_published(fs, st);
		drop = kvt_version_published(fs, ino, &pub, true);
		/* For the steps after the lock, under which a rename may
		 * change the name. */
		name = g_strdup(ino->name);
	}
	kvt_inode_unlock(p);
	if (ret == 0 && prep.st) {
		kvt_publication_finish(fs->store, &prep, pd, name, &pub, false);
		kvt_version_settle(ino, &pub);
	} else {
		kvt_publication_abort(fs->store, &prep);
	}
	if (ret == 0 && fs->sync)
		sret = kvt_store_sync_published(fs->store, pd, name, &id);
	/* Published, but not durable: the close or fsync fails, and the
	 * name goes, as a rename's does (namespace.c). */
	if (sret < 0)
		kvt_unpublish(fs, ino, &id, sret, 0, NULL);
	kvt_dir_unref(pd);
	kvt_version_wake(ino);
	if (ret < 0)
		__atomic_store_n(&st->orphan, true, __ATOMIC_RELEASE);
	kvt_stage_unref(st);
	if (ret == 0) {
		kvt_published_clear(&pub);
		if (drop)
			kvt_inode_unref(fs, ino);
		/* The kernel's cached size may be another version's. */
		if (fs->se)
			fuse_lowlevel_notify_inval_inode(fs->se, kvt_nodeid_of(fs, ino), -1, 0);
	}
	/* Published, but not durable: the close or fsync says so. */
	return ret > 0 ? 0 : ret < 0 ? ret : sret;
}

int kvt_version_set_size(struct kvt_fs *fs, struct kvt_inode *ino, off_t size,
			 struct kvt_stage **wstage, pid_t tid, uid_t uid)
{
	struct kvt_stage *st = NULL;
	bool publish, ref_inode = false, joined = false, orphan = false;
	uint64_t was;
	int ret;

	if (!wstage) {
		/* A writer's handle made room at its open (file.c). */
		kvt_inode_lock(ino);
		ret = kvt_version_room(fs, ino, tid, uid);
		kvt_inode_unlock(ino);
		if (ret < 0)
			return ret;
	}
	if (size == 0) {
		/* O_TRUNC (see ops.c, init): a version of its own, from
		 * nothing. */
		kvt_inode_lock(ino);
		ret = kvt_version_begin(fs, ino, true, uid, &ref_inode, &st);
		if (ret == 0 && wstage) {
			kvt_stage_unref(*wstage);
			*wstage = g_steal_pointer(&st);
		}
		kvt_inode_unlock(ino);
		kvt_stage_unref(st);
		if (ref_inode)
			kvt_inode_ref(ino);
		if (ret < 0)
			return ret;
	} else {
		ret = kvt_version_for_write(fs, ino, uid, wstage, &st, &joined);
		if (ret < 0)
			return ret;
		/* The truncate first: one past what the lower file system
		 * takes is its EFBIG, not a bound's EDQUOT; then the charge,
		 * undone with it if over the bound. */
		was = kvt_stage_size(st);
		ret = kvt_stage_truncate(st, size);
		if (ret == 0 && (uint64_t)size > was) {
			ret = kvt_bounds_stage_grow(fs, st, size);
			if (ret < 0)
				kvt_stage_truncate(st, was);
		}
		orphan = __atomic_load_n(&st->orphan, __ATOMIC_ACQUIRE);
		kvt_version_put(st);
		if (ret < 0)
			return ret;
	}
	/* truncate(2) by path is a whole new version at once, unless it
	 * changed the version a writer is writing, which that writer's close
	 * publishes.  A writer counted here may have closed already (its
	 * RELEASE comes after close() returns): a version begun here is
	 * nobody's to publish but this call's, and so is one whose close
	 * failed to publish it (an orphan) with no write since. */
	kvt_inode_lock(ino);
	publish = !wstage && (!joined || orphan || ino->writers == 0);
	kvt_inode_unlock(ino);
	return publish ? kvt_publish_in_place(fs, ino, NULL) : 0;
}
