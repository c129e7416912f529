/* Name resolution, the size check at resolve, and attributes
 * (resolve.h). */
#include "resolve.h"

#include <errno.h>
#include <string.h>

#include "name.h"
#include "object.h"
#include "purge.h"
#include "share.h"

void kvt_file_attr(struct kvt_inode *ino, struct stat *st)
{
	*st = ino->meta;
	st->st_ino = ino->st_ino;
	/* Unlinked, or renamed over, while someone holds it open. */
	st->st_nlink = __atomic_load_n(&ino->unlinked, __ATOMIC_RELAXED) ? 0 : 1;
	if (ino->has_record && ino->rec.kind != KVT_KIND_FILE) {
		/* A symbolic link or a special file: what its record says. */
		st->st_mode = kvt_kind_type(ino->rec.kind) | (st->st_mode & 07777);
		st->st_size = ino->rec.size;
		st->st_rdev = ino->rec.rdev;
		st->st_blocks = 0;
	} else if (!ino->has_record) {
		st->st_size = ino->stage ? (off_t)kvt_stage_size(ino->stage) : 0;
		st->st_blocks = (st->st_size + 511) / 512;
	} else {
		st->st_size = ino->rec.size;
		st->st_blocks = ino->blocks;
	}
}

int kvt_inode_attr(struct kvt_fs *fs, struct kvt_inode *ino, struct stat *st)
{
	if (ino->is_dir) {
		g_autoptr(kvt_dir) d = NULL;
		int ret = kvt_inode_dir(fs, ino, &d);

		if (ret == 0)
			ret = kvt_dir_stat(d, NULL, st);
		if (ret == 0)
			kvt_inode_dir_seen(ino, st);
		st->st_ino = ino->st_ino;
		return ret;
	}
	kvt_inode_lock(ino);
	kvt_file_attr(ino, st);
	kvt_inode_unlock(ino);
	return 0;
}

void kvt_fill_entry(struct kvt_fs *fs, struct kvt_inode *ino, const struct stat *dir_st,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = kvt_nodeid_of(fs, ino);
	e->attr_timeout = kvt_timeout(fs, fs->attr_timeout);
	e->entry_timeout = kvt_timeout(fs, fs->entry_timeout);
	if (ino->is_dir) {
		e->attr = *dir_st;
		e->attr.st_ino = ino->st_ino;
	} else {
		kvt_inode_lock(ino);
		kvt_file_attr(ino, &e->attr);
		kvt_inode_unlock(ino);
	}
}

void kvt_inode_take_record(struct kvt_inode *ino, struct kvt_record *rec,
			   const struct stat *rst, const struct stat *ost)
{
	kvt_record_clear(&ino->rec);
	ino->rec = *rec;
	kvt_record_init(rec);
	ino->has_record = true;
	ino->meta = *rst;
	kvt_record_show(&ino->rec, &ino->meta);
	ino->rec_ino = rst->st_ino;
	ino->rec_ctime = rst->st_ctim;
	if (rst->st_ino)
		ino->st_ino = rst->st_ino; /* see inode.c */
	ino->blocks = ost && ost->st_ino ? ost->st_blocks :
		      (blkcnt_t)((ino->rec.size + 511) / 512);
}

void kvt_record_id(struct kvt_record *dst, const struct kvt_record *src)
{
	kvt_record_init(dst);
	dst->hash = src->hash;
	dst->size = src->size;
	memcpy(dst->ref, src->ref, sizeof(dst->ref));
	dst->kind = src->kind;
}

/* Whether the record file @st describes is the one @ino took its version
 * from, unchanged (caller holds ino->lock). */
static bool record_file_unchanged(struct kvt_inode *ino, const struct stat *st)
{
	return ino->has_record && ino->rec_ino == st->st_ino &&
	       ino->rec_ctime.tv_sec == st->st_ctim.tv_sec &&
	       ino->rec_ctime.tv_nsec == st->st_ctim.tv_nsec;
}

/* What the lower disk says of a published file's name (look_file). */
struct file_look {
	struct kvt_record rec;
	struct stat ost;  /* its object */
	bool same;        /* the record file the inode took, unchanged */
	bool idle;        /* the inode has a version and no writer */
	bool renew;       /* the name gets a new inode (kvt_version_room) */
	bool fresh;
	uint64_t gen;     /* the inode's, when looked at */
	int ret;          /* kvt_name_lookup's */
};

/* Reads the record of @name, whose record file @st describes (and @held
 * holds, or -1: kvt_dir_hold), unless @file (the inode known for the
 * name, or NULL) took its version from that very file, and looks at its
 * object.  Needs no lock of the directory. */
static void look_file(struct kvt_fs *fs, struct kvt_dir *pd, const char *name,
		      struct kvt_inode *file, struct stat *st, int held, struct file_look *lk)
{
	kvt_record_init(&lk->rec);
	lk->same = lk->idle = lk->renew = false;
	lk->gen = 0;
	if (file) {
		kvt_inode_lock(file);
		/* Read whole for the new inode: xattrs and all. */
		lk->renew = file->renew;
		lk->same = record_file_unchanged(file, st) && !lk->renew;
		if (lk->same)
			kvt_record_id(&lk->rec, &file->rec);
		/* Written here: its writers' version goes to this name, over
		 * whatever another mount put there (last close wins). */
		lk->idle = file->has_record && !file->writers && !kvt_inode_pending(file);
		lk->gen = file->gen;
		kvt_inode_unlock_quiet(file);
	}
	lk->ret = kvt_name_lookup(fs->store, pd, name, lk->same, held, &lk->rec, st, &lk->ost,
				  &lk->fresh);
	if (lk->fresh)
		lk->same = false;
}

/* A look that found the name's record and its object whole: what a
 * lookup takes without the directory's lock (do_lookup). */
static bool look_whole(const struct file_look *lk)
{
	return lk->ret == 0 && (uint64_t)lk->ost.st_size == lk->rec.size;
}

/* Takes what @lk found of the published file @p/@name, whose record
 * file @st describes, into *@childp (an inode already known for the
 * name, or NULL).  A torn name is purged and answers ENOENT; an object
 * that went with its record, replaced by another mount meanwhile, is no
 * torn name (kvt_name_lookup).
 * A version another mount put at the name gets an inode of its own, as
 * one put there here does: the kernel keeps the old one's size and pages
 * for as long as it trusts them.  Caller holds p->lock; @lk is used up. */
static int take_file_locked(struct kvt_fs *fs, struct kvt_inode *p, struct kvt_dir *pd,
			    const char *name, const struct stat *st, bool by_inode,
			    struct kvt_inode **childp, struct file_look *lk, struct kvt_note *note)
{
	struct kvt_inode *child = *childp, *file = child && !child->is_dir ? child : NULL;
	struct kvt_torn_info torn = { 0 };
	struct kvt_record *rec = &lk->rec;
	int ret = lk->ret;

	if (ret == -EBADMSG) {
		torn.why = KVT_TORN_RECORD;
		kvt_purge_locked(fs, p, pd, name, file, NULL, &torn, note);
		return -ENOENT;
	}
	if (ret < 0) {
		kvt_record_clear(rec);
		return ret;
	}
	/* Another version, or another kind (the kernel cannot change an
	 * inode's type), under the same name: a new inode; and for a writer
	 * sent away from the inode known (kvt_version_room).  The record
	 * file rewritten with the same version (new metadata) is the same
	 * one. */
	if (file && (lk->renew || (!lk->same && (file->rec.kind != rec->kind ||
						  (lk->idle && strcmp(file->rec.ref, rec->ref)))))) {
		kvt_inode_detach(file);
		file = NULL;
	}
	if (ret == KVT_LOOKUP_MISSING) {
		torn.why = KVT_TORN_MISSING;
	} else if ((uint64_t)lk->ost.st_size != rec->size) {
		torn.why = KVT_TORN_SIZE;
		torn.found_size = lk->ost.st_size;
	}
	if (ret == KVT_LOOKUP_MISSING || (uint64_t)lk->ost.st_size != rec->size) {
		kvt_purge_locked(fs, p, pd, name, file, rec, &torn, note);
		kvt_record_clear(rec);
		return -ENOENT;
	}
	if (!file && child && by_inode) {
		/* Resolving the inode the kernel knows: it looks the name up
		 * again (ESTALE), and a lookup makes the new one. */
		kvt_inode_detach(child);
		kvt_record_clear(rec);
		return -ESTALE;
	}
	if (!file) {
		if (child)
			kvt_inode_detach(child);
		file = kvt_inode_new_file(fs, p, name);
		file->st_ino = st->st_ino; /* its record's */
		/* for the writer sent away from the inode before */
		file->rewritten = lk->renew;
		kvt_inode_attach(p, file);
	}
	kvt_inode_lock(file);
	if (lk->same)
		file->blocks = lk->ost.st_blocks;
	else
		kvt_inode_take_record(file, rec, st, &lk->ost);
	kvt_inode_unlock(file);
	kvt_record_clear(rec);
	*childp = file;
	return 0;
}

/* Resolves the published file @p/@name, whose record file @st describes
 * (and @held holds, or -1), into *@childp: rereads the record if the
 * lower one changed and checks its object's size (take_file_locked).
 * Caller holds p->lock. */
static int resolve_file_locked(struct kvt_fs *fs, struct kvt_inode *p, struct kvt_dir *pd,
			       const char *name, struct stat *st, int held, bool by_inode,
			       struct kvt_inode **childp, struct kvt_note *note)
{
	struct kvt_inode *child = *childp;
	struct file_look lk;

	look_file(fs, pd, name, child && !child->is_dir ? child : NULL, st, held, &lk);
	return take_file_locked(fs, p, pd, name, st, by_inode, childp, &lk, note);
}

/* Whether @st is still the record file @ino was resolved from (caller
 * holds the parent's lock). */
static bool same_record_file(struct kvt_inode *ino, const struct stat *st)
{
	bool same;

	kvt_inode_lock(ino);
	same = record_file_unchanged(ino, st);
	kvt_inode_unlock(ino);
	return same;
}

static int resolve_inode(struct kvt_fs *fs, struct kvt_inode *ino, bool to_open,
			 struct kvt_note *note)
{
	struct kvt_inode *p, *child = ino;
	struct kvt_dir *pd;
	struct stat st;
	bool published;
	int ret;

	if (ino->is_dir)
		return 0;
	kvt_inode_lock(ino);
	published = ino->has_record;
	kvt_inode_unlock(ino);
	if (!published)
		return 0; /* pending: nothing on the lower disk to check yet */
	p = kvt_lock_parent(fs, ino, &pd, &ret);
	if (!p)
		return ret;
	ret = kvt_dir_stat(pd, ino->name, &st);
	if (ret == -ENOENT) /* another mount removed it */
		kvt_inode_detach(ino);
	else if (ret == 0 && !S_ISREG(st.st_mode))
		ret = -ENOENT;
	else if (ret == 0 && !(to_open && same_record_file(ino, &st)))
		ret = resolve_file_locked(fs, p, pd, ino->name, &st, -1, true, &child, note);
	if (ret == -ESTALE && !note->parent) {
		/* Another mount's version took the name: the kernel's entry
		 * goes, so that its next walk looks the name up. */
		note->parent = kvt_nodeid_of(fs, p);
		note->name = g_strdup(ino->name);
	}
	kvt_inode_unlock(p);
	kvt_dir_unref(pd);
	return ret;
}

int kvt_resolve_inode(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_note *note)
{
	return resolve_inode(fs, ino, false, note);
}

int kvt_resolve_inode_to_open(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_note *note)
{
	return resolve_inode(fs, ino, true, note);
}

/* The directory @dir just found, held at @held, stays held for what is
 * looked up in it next (a walk down vLLM's fan-out): opening it again by
 * name is a round trip on a network file system. */
static void keep_dir(struct kvt_fs *fs, struct kvt_inode *dir, int held, const struct stat *st)
{
	g_autoptr(kvt_dir) d = NULL;

	if (kvt_dir_from_hold(held, dir->name, st, &d) == 0)
		kvt_dircache_put(fs->dirs, dir->serial, d);
}

/* Whether @file's state is still what look_file saw (caller holds its
 * parent's lock). */
static bool file_unchanged_since(struct kvt_inode *file, uint64_t gen)
{
	bool same;

	kvt_inode_lock(file);
	same = file->gen == gen;
	kvt_inode_unlock_quiet(file);
	return same;
}

/*
 * A lookup that looks at the lower disk without the directory's lock.
 * Under it, lookups in one directory waited on each other's round trips:
 * over a network file system each look is several, and every load's first
 * steps go through the same few directories (the top of vLLM's fan-out).
 * What it saw is taken only if nothing in the directory changed meanwhile
 * (dir->gen), the name has the same inode, unchanged (file->gen), and the
 * look was plain: the name missing, a directory, or a record whose object
 * is whole.  Anything else answers -EAGAIN, for the caller to look again
 * under the lock, where purges, detaches and errors are handled.
 */
static int lookup_unlocked(struct kvt_fs *fs, struct kvt_inode *parent, struct kvt_dir *pd,
			   const char *name, struct fuse_entry_param *e,
			   struct kvt_note *note, struct kvt_inode **unref)
{
	struct kvt_inode *child, *found = NULL;
	struct file_look lk = { .ret = -EAGAIN };
	struct stat st = { 0 };
	kvt_autofd held = -1;
	bool quiet = true;
	uint64_t gen;
	int ret;

	kvt_record_init(&lk.rec);
	kvt_inode_lock(parent);
	child = g_hash_table_lookup(parent->children, name);
	gen = parent->gen;
	if (child && kvt_inode_is_local(child)) {
		kvt_inode_unlock_quiet(parent);
		return -EAGAIN; /* no look at the lower disk: the caller's */
	}
	if (child)
		kvt_inode_ref(child);
	*unref = child;
	kvt_inode_unlock_quiet(parent);

	if (!child) {
		ret = kvt_dir_hold(pd, name, &st);
		held = ret;
		ret = MIN(ret, 0);
	} else {
		ret = kvt_dir_stat(pd, name, &st);
	}
	if (ret == 0 && S_ISDIR(st.st_mode))
		ret = kvt_dir_show(pd, name, &st);
	if (ret == 0 && S_ISREG(st.st_mode)) {
		look_file(fs, pd, name, child && !child->is_dir ? child : NULL, &st, held, &lk);
		if (!look_whole(&lk))
			ret = -EAGAIN;
	} else if (ret == 0 && !S_ISDIR(st.st_mode)) {
		ret = -EAGAIN;
	} else if (ret < 0 && !(ret == -ENOENT && !child)) {
		ret = -EAGAIN;
	}
	if (ret == -EAGAIN) {
		kvt_record_clear(&lk.rec);
		return ret;
	}

	kvt_inode_lock(parent);
	if (parent->gen != gen || g_hash_table_lookup(parent->children, name) != child ||
	    (child && !child->is_dir && !file_unchanged_since(child, lk.gen))) {
		ret = -EAGAIN;
	} else if (ret < 0) {
		/* missing, and not known here */
	} else if (S_ISDIR(st.st_mode)) {
		if (child && child->is_dir && child->lower_ino == st.st_ino &&
		    child->dev == st.st_dev) {
			found = child;
		} else if (child) {
			ret = -EAGAIN;
		} else {
			found = kvt_inode_new_dir(fs, parent, name, &st);
			kvt_inode_attach(parent, found);
			if (held >= 0)
				keep_dir(fs, found, held, &st);
		}
	} else {
		found = child;
		ret = take_file_locked(fs, parent, pd, name, &st, false, &found, &lk, note);
		/* A version another mount put there took the name from the
		 * inode known: the table changed. */
		quiet = found == child || !child;
	}
	if (ret == 0) {
		kvt_count_lookup(fs, found);
		kvt_fill_entry(fs, found, &st, e);
	}
	if (quiet)
		kvt_inode_unlock_quiet(parent);
	else
		kvt_inode_unlock(parent);
	kvt_record_clear(&lk.rec);
	return ret;
}

/* kvt_do_lookup, of a name whose metadata the caller may know already
 * (@known: it just made it), which spares a look at the lower disk. */
static int do_lookup(struct kvt_fs *fs, struct kvt_inode *parent, struct kvt_dir *pd,
		     const char *name, const struct stat *known, struct fuse_entry_param *e,
		     struct kvt_note *note)
{
	struct kvt_inode *child;
	struct stat st = { 0 };
	kvt_autofd held = -1;
	int ret = 0;

	if (strlen(name) > NAME_MAX)
		return -ENAMETOOLONG;
	if (!known) {
		struct kvt_inode *seen = NULL;

		ret = lookup_unlocked(fs, parent, pd, name, e, note, &seen);
		if (seen)
			kvt_inode_unref(fs, seen);
		if (ret != -EAGAIN)
			return ret;
		ret = 0;
	}
	kvt_inode_lock(parent);
	child = g_hash_table_lookup(parent->children, name);
	if (child && kvt_inode_is_local(child))
		goto found; /* being written here: not on the lower disk yet */
	if (known) {
		st = *known;
	} else if (!child) {
		/* New to this mount: held while we look, so that what it is
		 * (a directory to walk into, a record to read) is opened
		 * from there, not by its name again. */
		ret = kvt_dir_hold(pd, name, &st);
		held = ret;
		if (ret == -EMFILE || ret == -ENFILE)
			ret = kvt_dir_stat(pd, name, &st); /* needs no descriptor */
		ret = MIN(ret, 0);
	} else {
		ret = kvt_dir_stat(pd, name, &st);
	}
	if (ret == 0 && !known && S_ISDIR(st.st_mode))
		ret = kvt_dir_show(pd, name, &st);
	if (ret == -ESTALE && parent != fs->root && kvt_dir_gone(pd))
		/* The directory itself went (another mount removed it): the
		 * name is not there.  A store there makes it again. */
		ret = -ENOENT;
	if (ret < 0) {
		/* Gone from the lower directory.  An I/O error says nothing of
		 * the name: a file being rewritten in place keeps it, or its
		 * writer's close would publish nothing. */
		if (child && ret == -ENOENT)
			kvt_inode_detach(child);
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		if (child && child->is_dir && child->lower_ino == st.st_ino &&
		    child->dev == st.st_dev)
			goto found;
		if (child)
			kvt_inode_detach(child);
		child = kvt_inode_new_dir(fs, parent, name, &st);
		kvt_inode_attach(parent, child);
		if (held >= 0)
			keep_dir(fs, child, held, &st);
		goto found;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -ENOENT; /* nothing kvtierfs wrote */
		goto out;
	}
	ret = resolve_file_locked(fs, parent, pd, name, &st, held, false, &child, note);
	if (ret < 0)
		goto out;
found:
	kvt_count_lookup(fs, child);
	kvt_fill_entry(fs, child, &st, e);
out:
	kvt_inode_unlock(parent);
	return ret;
}

int kvt_do_lookup(struct kvt_fs *fs, struct kvt_inode *parent, struct kvt_dir *pd,
		  const char *name, struct fuse_entry_param *e, struct kvt_note *note)
{
	return do_lookup(fs, parent, pd, name, NULL, e, note);
}

int kvt_lookup_made(struct kvt_fs *fs, struct kvt_inode *parent, struct kvt_dir *pd,
		    const char *name, struct kvt_dir *made, struct fuse_entry_param *e,
		    struct kvt_note *note)
{
	struct stat st;

	if (kvt_dir_seen(made, &st) < 0)
		return kvt_do_lookup(fs, parent, pd, name, e, note);
	return do_lookup(fs, parent, pd, name, &st, e, note);
}

bool kvt_new_owner(struct kvt_fs *fs, struct kvt_dir *pd, const struct fuse_ctx *ctx,
		   uid_t *uid, gid_t *gid)
{
	/* The directory's mode as fresh as the kernel's attributes of it. */
	gint64 max_age = (gint64)(kvt_timeout(fs, fs->attr_timeout) * G_USEC_PER_SEC);
	mode_t mode;
	gid_t dgid;

	*uid = ctx->uid;
	*gid = ctx->gid;
	if (kvt_dir_inherit(pd, max_age, &mode, &dgid) < 0 || !(mode & S_ISGID))
		return false;
	*gid = dgid;
	return true;
}

void kvt_reply_attr(fuse_req_t req, struct kvt_fs *fs, struct kvt_inode *ino, int ret)
{
	struct stat st;

	if (ret == 0)
		ret = kvt_inode_attr(fs, ino, &st);
	if (ret < 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, kvt_timeout(fs, fs->attr_timeout));
}
