/* The namespace: mkdir, rmdir, unlink, rename.  Each change is made on
 * the lower directory first (name.h), then in the inode tree. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "evictor.h"
#include "usage.h"
#include "name.h"
#include "object.h"
#include "ops.h"
#include "purge.h"
#include "resolve.h"
#include "special.h"
#include "version.h"

/* A lower directory that shows its maker as owner (the kernel applied
 * the caller's umask already; the daemon's own is 0, see main.c), held in
 * *@out.  Made 0700 for another owner than the daemon, who is written in
 * it (kvt_dir_set_shown): no directory below is a user's. */
static int make_dir(struct kvt_fs *fs, struct kvt_dir *pd, const char *name, mode_t mode,
		    const struct fuse_ctx *ctx, struct kvt_dir **out)
{
	g_autoptr(kvt_dir) d = NULL;
	struct stat st;
	bool mine;
	uid_t uid;
	gid_t gid;
	int ret;

	/* In a set-group-ID directory, set-group-ID itself. */
	if (kvt_new_owner(fs, pd, ctx, &uid, &gid))
		mode |= S_ISGID;
	mine = uid == geteuid() && gid == getegid();
	ret = kvt_dir_mkdir(pd, name, mine ? mode & 07777 : 0700);
	if (ret == 0)
		ret = kvt_dir_open_path(pd, name, true, &d);
	/* The daemon's, which is who most clients are: then it shows its own
	 * and there is nothing to write (each call is a round trip on a
	 * network file system). */
	if (ret == 0 && (!mine || kvt_dir_seen(d, &st) < 0 || st.st_uid != uid ||
			 st.st_gid != gid || (st.st_mode & 07777) != (mode & 07777)))
		ret = kvt_dir_set_shown(d, KVT_SET_UID | KVT_SET_GID | KVT_SET_MODE, mode, uid,
					gid);
	if (ret < 0 && ret != -EEXIST)
		kvt_dir_rmdir(pd, name);
	if (ret == 0)
		*out = g_steal_pointer(&d);
	return ret;
}

/* The directory just made stays open for what is made in it next (a
 * store's mkdir -p is followed at once by its file): opening it again
 * is a round trip on a network file system. */
static void keep_made_dir(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_dir *d)
{
	if (ino->is_dir && d->dev == ino->dev && d->ino == ino->lower_ino)
		kvt_dircache_put(fs->dirs, ino->serial, d);
}

/* Makes of one directory that GlusterFS lost: each is a race lost anew. */
#define MKDIR_LOST_TRIES 4

/* Whether @name, which a mkdir was just told exists in @pd, is not there
 * (and so the mkdir is made again). */
static bool dir_lost(struct kvt_dir *pd, const char *name)
{
	struct stat st;
	int ret = kvt_dir_stat(pd, name, &st);

	return ret == -ENOENT || ret == -ESTALE;
}

void kvt_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *p = kvt_inode_of(fs, parent);
	g_autoptr(kvt_dir) pd = NULL;
	g_autoptr(kvt_dir) made = NULL;
	struct kvt_note note = { 0 };
	struct fuse_entry_param e;
	int ret = kvt_inode_dir_to_make(fs, p, &pd);

	for (int remade = 0, lost = 0; ret == 0;) {
		bool known;

		kvt_inode_lock(p);
		known = g_hash_table_lookup(p->children, name) != NULL;
		ret = known ? -EEXIST : make_dir(fs, pd, name, mode, fuse_req_ctx(req), &made);
		kvt_inode_unlock(p);
		if (ret == -EEXIST && !known && lost < MKDIR_LOST_TRIES && dir_lost(pd, name)) {
			/* Told it exists, and it does not: GlusterFS loses a
			 * directory that another client makes, or looks up,
			 * while this one makes it.  The kernel's lookup after
			 * an EEXIST would fail the caller's mkdir -p. */
			lost++;
			ret = 0;
			continue;
		}
		if (remade++ || (ret != -ENOENT && ret != -ESTALE) || p == fs->root)
			break;
		/* The directory is gone from under its descriptor: another
		 * mount removed it (an evictor's rmdir of an empty one), or
		 * a network file system no longer knows the one this mount
		 * holds, though it still answers for it (GlusterFS, two hosts
		 * making one directory at once, keeps one of the two).  Made
		 * again, or the one at its name taken, and so is the mkdir. */
		g_clear_pointer(&pd, kvt_dir_unref);
		ret = kvt_inode_dir_remake(fs, p, &pd);
	}
	if (ret == 0)
		ret = kvt_lookup_made(fs, p, pd, name, made, &e, &note);
	if (ret == 0)
		keep_made_dir(fs, kvt_inode_of(fs, e.ino), made);
	if (ret < 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_entry(req, &e);
	kvt_notify(fs, &note, false);
}

void kvt_op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
	struct kvt_record rec;

	if (!target[0] || strlen(target) > PATH_MAX) {
		fuse_reply_err(req, target[0] ? ENAMETOOLONG : ENOENT);
		return;
	}
	kvt_record_init(&rec);
	rec.kind = KVT_KIND_SYMLINK;
	rec.target = g_strdup(target);
	rec.size = strlen(target);
	kvt_make_node(req, parent, name, &rec, 0777);
}

void kvt_op_readlink(fuse_req_t req, fuse_ino_t n)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *ino = kvt_inode_of(fs, n);
	g_autofree char *target = NULL;

	if (!ino->is_dir) {
		kvt_inode_lock(ino);
		if (ino->has_record && ino->rec.kind == KVT_KIND_SYMLINK)
			target = g_strdup(ino->rec.target);
		kvt_inode_unlock(ino);
	}
	if (target)
		fuse_reply_readlink(req, target);
	else
		fuse_reply_err(req, EINVAL);
}

/* A hard link would need two names on one inode, whose metadata and
 * bytes the two share; a name here is its own record of an object, so
 * POSIX's link cannot be kept: refused, as on file systems without hard
 * links. */
void kvt_op_link(fuse_req_t req, fuse_ino_t n, fuse_ino_t newparent, const char *newname)
{
	fuse_reply_err(req, EPERM);
}

/* Two directories, in address order (caller holds the tree lock). */
static void lock_two(struct kvt_inode *a, struct kvt_inode *b)
{
	if (a == b) {
		kvt_inode_lock(a);
	} else if (a < b) {
		kvt_inode_lock(a);
		kvt_inode_lock(b);
	} else {
		kvt_inode_lock(b);
		kvt_inode_lock(a);
	}
}

static void unlock_two(struct kvt_inode *a, struct kvt_inode *b)
{
	kvt_inode_unlock(a);
	if (a != b)
		kvt_inode_unlock(b);
}

/* A file of @dir exists only in memory (caller holds dir->lock). */
static bool has_local_files(struct kvt_inode *dir)
{
	GHashTableIter it;
	gpointer k, v;

	g_hash_table_iter_init(&it, dir->children);
	while (g_hash_table_iter_next(&it, &k, &v))
		if (kvt_inode_is_local(v))
			return true;
	return false;
}

void kvt_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *p = kvt_inode_of(fs, parent), *child;
	g_autoptr(kvt_dir) pd = NULL;
	int ret = kvt_inode_dir(fs, p, &pd);

	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	kvt_inode_lock(p);
	child = g_hash_table_lookup(p->children, name);
	if (child && child->is_dir)
		kvt_inode_ref(child);
	else
		child = NULL;
	kvt_inode_unlock(p);

	kvt_tree_lock(fs);
	lock_two(p, child ? child : p);
	/* Files being written in it exist in memory only: the lower
	 * directory may be empty while the directory is not. */
	if (child && g_hash_table_lookup(p->children, name) == child && has_local_files(child))
		ret = -ENOTEMPTY;
	else
		ret = kvt_dir_rmdir(pd, name);
	if (ret == 0 && child && g_hash_table_lookup(p->children, name) == child) {
		kvt_inode_detach(child);
		kvt_dircache_drop(fs->dirs, child->serial);
	}
	unlock_two(p, child ? child : p);
	kvt_tree_unlock(fs);
	if (child)
		kvt_inode_unref(fs, child);
	fuse_reply_err(req, -ret);
}

/* Takes the version @ino was writing (its name went), for the caller to
 * drop once it holds no lock (its staged file goes with its last
 * reference); the caller then drops the inode's pending reference too. */
static struct kvt_stage *take_version(struct kvt_inode *ino)
{
	struct kvt_stage *st;

	kvt_inode_lock(ino);
	st = g_steal_pointer(&ino->stage);
	kvt_inode_unlock(ino);
	return st;
}

void kvt_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *p = kvt_inode_of(fs, parent), *child;
	g_autoptr(kvt_dir) pd = NULL;
	struct kvt_stage *version = NULL;
	bool local = false;
	struct stat st;
	int ret = kvt_inode_dir(fs, p, &pd);

	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	kvt_inode_lock(p);
	child = g_hash_table_lookup(p->children, name);
	if (child)
		local = kvt_inode_is_local(child);
	ret = kvt_dir_stat(pd, name, &st);
	if (ret == 0) {
		ret = S_ISDIR(st.st_mode) ? -EISDIR : kvt_name_remove(fs->store, pd, name);
		if (ret == 0)
			kvt_stat_add(&fs->stats, KVT_STAT_unlinks, 1);
	} else if (local) {
		ret = 0;
	}
	if (ret == 0 && child) {
		kvt_evictor_forget(fs->store, child->rec_ino);
		kvt_inode_detach(child);
		version = take_version(child);
	}
	kvt_inode_unlock(p);
	if (version) {
		kvt_stage_unref(version);
		kvt_inode_unref(fs, child);
	}
	fuse_reply_err(req, -ret);
}

/* Moves @ino to @np/@name in the tables (caller holds the tree lock and
 * both directories' locks).  The old parent's reference is the caller's
 * to drop, unlocked. */
static void move_child(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_inode *np,
		       const char *name)
{
	struct kvt_inode *op = ino->parent;

	if (g_hash_table_lookup(op->children, ino->name) == ino)
		g_hash_table_remove(op->children, ino->name);
	g_free(ino->name);
	ino->name = g_strdup(name);
	ino->parent = np;
	g_hash_table_replace(np->children, ino->name, ino);
	kvt_inode_ref(np);
	kvt_lru_rename(fs, ino, np, name);
}

/* RENAME_EXCHANGE in the tables. */
static void swap_children(struct kvt_fs *fs, struct kvt_inode *a, struct kvt_inode *b)
{
	char *aname = a->name;
	struct kvt_inode *ap = a->parent;

	a->name = b->name;
	a->parent = b->parent;
	b->name = aname;
	b->parent = ap;
	g_hash_table_replace(a->parent->children, a->name, a);
	g_hash_table_replace(b->parent->children, b->name, b);
	kvt_lru_rename(fs, a, a->parent, a->name);
	kvt_lru_rename(fs, b, b->parent, b->name);
}

struct rename {
	struct kvt_inode *p, *np, *src, *dst;
	struct kvt_dir *pd, *npd;
	const char *name, *newname;
	unsigned int flags;
	struct kvt_stage *st;       /* the version the rename publishes */
	struct kvt_publication prep; /* made ready before the locks */
	struct kvt_published pub;
	bool published;
	struct kvt_record id;       /* the object published, for -o sync */
	struct kvt_record replaced; /* what was at the new name */
	/* The replaced inode's unwritten version, dropped after the locks,
	 * and then that inode's pending reference. */
	struct kvt_stage *dst_version;
	struct kvt_inode *dst_pending;
};

/* A rename that publishes a temp file (the common one) makes the object
 * and the record before the tree lock (publish.h): on a network file
 * system each is a round trip, and the tree lock, held for them, made
 * every store of the mount wait for the one before.  Only a temp name:
 * no close publishes one, and the kernel orders the renames and unlinks
 * of one directory, so nothing else takes the version meanwhile. */
static int rename_prepare(struct kvt_fs *fs, struct rename *r)
{
	int ret;

	if (!kvt_is_tmp_name(fs, r->name) || (r->flags & RENAME_NOREPLACE) ||
	    !kvt_inode_is_local(r->src))
		return 0;
	ret = kvt_version_prepare(fs, r->src, r->st, &r->prep);
	/* 1: nothing to publish; the locked half finds out what is. */
	return ret < 0 ? ret : 0;
}

/* The lower half of a rename (caller holds the tree lock and both
 * directories' locks). */
static int rename_lower(struct kvt_fs *fs, struct rename *r)
{
	struct stat sst, dst_st;
	bool src_local = r->src && kvt_inode_is_local(r->src);
	/* A temp file written here and never published has no lower entry
	 * (temp names are published by a rename only): the common rename,
	 * which publishes it, spares the lower file system two looks (each
	 * a round trip on a network one); the publication deals with
	 * whatever is at the new name. */
	bool plain_publish = r->st && src_local && kvt_is_tmp_name(fs, r->name) &&
			     !(r->flags & (RENAME_NOREPLACE | RENAME_EXCHANGE));
	bool src_lower = !plain_publish && kvt_dir_stat(r->pd, r->name, &sst) == 0;
	bool dst_lower = !plain_publish && kvt_dir_stat(r->npd, r->newname, &dst_st) == 0;
	bool dst_local = r->dst && kvt_inode_is_local(r->dst);
	int ret = 1;

	if (!src_lower && !src_local && !r->st)
		return -ENOENT;
	if ((r->flags & RENAME_NOREPLACE) && (dst_lower || dst_local))
		return -EEXIST;
	if (r->flags & RENAME_EXCHANGE) {
		if (!src_lower || !dst_lower)
			return -EINVAL; /* unpublished files have no lower entry */
		return kvt_name_rename(fs->store, r->pd, r->name, r->npd, r->newname,
				       RENAME_EXCHANGE, &r->replaced);
	}
	if (r->st) {
		/* Renaming a finished temp file to its final name is the
		 * moment of publication. */
		ret = kvt_version_install(fs, r->src, r->st, &r->prep, r->npd, r->newname,
					  KVT_PUBLISH_KEEP_REPLACED, &r->pub);
		if (ret < 0)
			return ret;
		if (ret == 0) {
			r->published = true;
			kvt_record_id(&r->id, &r->pub.rec);
			r->replaced = r->pub.replaced;
			kvt_record_init(&r->pub.replaced);
			/* An older published version under the old name goes. */
			if (src_lower)
				kvt_name_remove(fs->store, r->pd, r->name);
			return 0;
		}
		/* 1: a flush published it meanwhile; a rename of what is
		 * published now. */
		if (plain_publish) {
			src_lower = kvt_dir_stat(r->pd, r->name, &sst) == 0;
			dst_lower = kvt_dir_stat(r->npd, r->newname, &dst_st) == 0;
		}
	}
	if (src_lower)
		return kvt_name_rename(fs->store, r->pd, r->name, r->npd, r->newname, 0,
				       &r->replaced);
	if (dst_lower) {
		/* An unpublished file renamed over a published name (a temp
		 * name): the old record goes. */
		if (S_ISDIR(dst_st.st_mode))
			return -EISDIR;
		return kvt_name_take(fs->store, r->npd, r->newname, &r->replaced);
	}
	return 0;
}

/* @r->src moves to its new name; its old parent's reference is the
 * caller's to drop. */
static struct kvt_inode *move_src(struct kvt_fs *fs, struct rename *r)
{
	struct kvt_inode *old_parent = r->src->parent;

	move_child(fs, r->src, r->np, r->newname);
	return old_parent;
}

/* A process that resolved the replaced name before the rename may still
 * open it: its object goes when the kernel forgets the inode, not now
 * (caller holds both directories' locks; the file's is taken here). */
static void keep_replaced_object(struct rename *r)
{
	kvt_inode_lock(r->dst);
	if (r->dst->has_record && r->replaced.ref[0] &&
	    !strcmp(r->dst->rec.ref, r->replaced.ref)) {
		r->dst->release_on_free = true;
		kvt_record_clear(&r->replaced);
	}
	kvt_inode_unlock(r->dst);
}

/* The inode tree follows the lower rename (same locks).  Returns the
 * inode whose reference the caller drops, unlocked.  The replaced inode
 * is read here, under the locks: once detached, nothing else keeps it
 * (the kernel may forget it at once), but its pending reference
 * (r->dst_pending) while it has a version. */
static struct kvt_inode *rename_tree(struct kvt_fs *fs, struct rename *r)
{
	if (r->flags & RENAME_EXCHANGE) {
		if (r->src && r->dst) {
			swap_children(fs, r->src, r->dst);
		} else {
			if (r->src)
				kvt_inode_detach(r->src);
			if (r->dst)
				kvt_inode_detach(r->dst);
		}
		return NULL;
	}
	if (r->dst && r->dst != r->src) {
		kvt_inode_detach(r->dst);
		if (!r->dst->is_dir) {
			keep_replaced_object(r);
			r->dst_version = take_version(r->dst);
			if (r->dst_version)
				r->dst_pending = r->dst;
		}
	}
	return r->src ? move_src(fs, r) : NULL;
}

/* A rename; *@gone says when it failed because the new parent's lower
 * directory is gone (kvt_dir_gone). */
static int rename_once(struct kvt_fs *fs, fuse_ino_t parent, const char *name,
		       fuse_ino_t newparent, const char *newname, unsigned int flags,
		       bool *gone)
{
	struct rename r = {
		.p = kvt_inode_of(fs, parent), .np = kvt_inode_of(fs, newparent),
		.name = name, .newname = newname, .flags = flags,
	};
	struct kvt_inode *unref_parent = NULL;
	bool drop = false;
	int ret;

	*gone = false;
	kvt_record_init(&r.replaced);
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	if (strlen(newname) > NAME_MAX)
		return -ENAMETOOLONG;
	ret = kvt_inode_dir(fs, r.p, &r.pd);
	if (ret == 0)
		ret = kvt_inode_dir(fs, r.np, &r.npd);
	if (ret < 0)
		goto reply;
	kvt_inode_lock(r.p);
	r.src = g_hash_table_lookup(r.p->children, name);
	if (r.src)
		kvt_inode_ref(r.src);
	kvt_inode_unlock(r.p);
	if (r.src && !r.src->is_dir && !(flags & RENAME_EXCHANGE) &&
	    !kvt_is_tmp_name(fs, newname)) {
		kvt_inode_lock(r.src);
		if (kvt_inode_pending(r.src))
			r.st = kvt_stage_ref(r.src->stage);
		kvt_inode_unlock(r.src);
		/* Any hashing left, and with -o sync the bytes' sync, are
		 * done before the locks are taken. */
		ret = r.st ? kvt_stage_prepare(r.st) : 0;
		if (ret == 0 && r.st && fs->sync)
			ret = kvt_stage_sync(r.st);
		if (ret == 0 && r.st)
			ret = rename_prepare(fs, &r);
		if (ret < 0)
			goto reply;
		/* Published under the locks below: room is made before
		 * (usage.h). */
		if (r.st && !r.prep.st)
			kvt_usage_wait_room(fs->store, kvt_stage_size(r.st));
	}

	kvt_tree_lock(fs);
	lock_two(r.p, r.np);
	r.dst = g_hash_table_lookup(r.np->children, newname);
	ret = rename_lower(fs, &r);
	if (ret == 0)
		unref_parent = rename_tree(fs, &r);
	if (r.published)
		drop = kvt_version_published(fs, r.src, &r.pub, false);
	unlock_two(r.p, r.np);
	kvt_tree_unlock(fs);
	if (r.prep.st && r.published) {
		kvt_publication_finish(fs->store, &r.prep, r.npd, newname, &r.pub, true);
		kvt_version_settle(r.src, &r.pub);
	} else {
		kvt_publication_abort(fs->store, &r.prep);
	}
	kvt_usage_release_room(fs->store);
	/* Published, but not durable: the rename fails, as a failed fsync
	 * would say, and takes the name back.  -o sync promises that what a
	 * call that returned published survives a power cut: a rename that
	 * answered success over a failed sync would break that; one that
	 * answered the error and left the name would publish a name its
	 * client was told is not there.  So the name goes (the temp name
	 * went with the rename: the version is lost, as a block whose store
	 * failed is; a KV cache computes it again). */
	if (r.published && fs->sync) {
		ret = kvt_store_sync_published(fs->store, r.npd, newname, &r.id);
		if (ret < 0)
			kvt_unpublish(fs, r.src, &r.id, ret, kvt_nodeid_of(fs, r.p), name);
	}

	if (drop)
		kvt_inode_unref(fs, r.src);
	if (r.replaced.ref[0])
		kvt_object_release(fs->store, &r.replaced);
	if (r.dst_version) {
		kvt_stage_unref(r.dst_version);
		kvt_inode_unref(fs, r.dst_pending);
	}
	if (unref_parent)
		kvt_inode_unref(fs, unref_parent);
reply:
	if (r.st) {
		kvt_version_wake(r.src);
		kvt_stage_unref(r.st);
	}
	/* Its lower directory cannot be opened as the one it was, or is
	 * removed under its fd. */
	*gone = (ret == -ENOENT || ret == -ESTALE) && r.np != fs->root && r.np->is_dir &&
		((r.pd && !r.npd) || (r.npd && kvt_dir_gone(r.npd)));
	kvt_published_clear(&r.pub);
	kvt_record_clear(&r.replaced);
	kvt_dir_unref(r.pd);
	kvt_dir_unref(r.npd);
	if (r.src)
		kvt_inode_unref(fs, r.src);
	return ret;
}

void kvt_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		   fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	bool gone;
	int ret = rename_once(fs, parent, name, newparent, newname, flags, &gone);

	if (gone) {
		/* Another mount removed the directory the name goes to (an
		 * evictor's rmdir of an empty one): made again, the rename is
		 * made again. */
		struct kvt_dir *d = NULL;

		ret = kvt_inode_dir_remake(fs, kvt_inode_of(fs, newparent), &d);
		kvt_dir_unref(d);
		if (ret == 0)
			ret = rename_once(fs, parent, name, newparent, newname, flags, &gone);
	}
	fuse_reply_err(req, -ret);
}
