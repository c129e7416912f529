/* Files: create, open, read, write, flush, fsync, release; fsyncdir.
 *
 * A reader of a published file reads its object, checked before the
 * first byte is served (verify.h); a read that finds fewer bytes than
 * recorded answers EIO, never a short count.  A writer writes a version
 * of its own (version.h). */
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "evictor.h"
#include "handle.h"
#include "io.h"
#include "lowerr.h"
#include "memcopy.h"
#include "object.h"
#include "purge.h"
#include "receive.h"
#include "resolve.h"
#include "special.h"
#include "splice.h"
#include "version.h"

/* Reads refresh the record's atime at most this often (an evictor reads
 * it; rewriting it on every load would cost a lower metadata write). */
#define ATIME_REFRESH_SEC 10

static void open_writer(struct kvt_inode *ino, struct fuse_file_info *fi, struct kvt_handle *h,
			pid_t opener)
{
	h->writer = true;
	ino->writers++;
	/* Without atomic O_TRUNC (ops.c) the O_TRUNC of this open follows as
	 * a SETATTR without a handle, from the same thread, before the open
	 * returns: kvt_handle_trunc finds this handle for it, so that the
	 * empty version is this handle's, published at its close. */
	if (!h->wstage) {
		h->opener = opener;
		__atomic_store_n(&h->fresh, true, __ATOMIC_RELAXED);
		ino->fresh_writers = g_slist_prepend(ino->fresh_writers, h);
	}
	/* Writes bypass the page cache so that it only ever holds published
	 * bytes, which readers of older versions may share.  O_DIRECT ones
	 * do anyway, and on the kernel's own direct I/O path the requests of
	 * one large write are sent in parallel, not one after the other. */
	if (!(fi->flags & O_DIRECT))
		fi->direct_io = 1;
	fi->fh = (uintptr_t)h;
}

/* A new file at @p/@name, in memory until it is published (caller holds
 * p->lock). */
static int new_local_file(struct kvt_fs *fs, struct kvt_inode *p, struct kvt_dir *pd,
			  const char *name, mode_t mode, const struct fuse_ctx *ctx,
			  struct kvt_inode **out)
{
	struct kvt_inode *ino;
	struct stat st;
	int ret;

	if (strlen(name) > NAME_MAX)
		return -ENAMETOOLONG;
	if (g_hash_table_lookup(p->children, name) || kvt_dir_stat(pd, name, &st) == 0)
		return -EEXIST;
	ino = kvt_inode_new_file(fs, p, name);
	ret = kvt_bounds_stage_new(fs, ctx->uid, &ino->stage);
	if (ret < 0) {
		/* Never attached nor seen: freed here, under the lock, without
		 * the tree lock that an unref would need. */
		kvt_inode_discard(fs, ino);
		return ret;
	}
	kvt_inode_ref(ino); /* pending */
	ino->st_ino = ino->stage->record_st.st_ino; /* see inode.c */
	ino->meta.st_mode = S_IFREG | (mode & 07777);
	kvt_new_owner(fs, pd, ctx, &ino->meta.st_uid, &ino->meta.st_gid);
	ino->meta.st_blksize = 4096;
	clock_gettime(CLOCK_REALTIME, &ino->meta.st_mtim);
	ino->meta.st_atim = ino->meta.st_ctim = ino->meta.st_mtim;
	kvt_inode_attach(p, ino);
	kvt_count_lookup(fs, ino);
	*out = ino;
	return 0;
}

static int open_inode(struct kvt_fs *fs, struct kvt_inode *ino, struct fuse_file_info *fi,
		      fuse_req_t req);

/* A create of a name that is there: the lookup and the open of what is
 * there, replied as the create. */
static void create_existing(fuse_req_t req, struct kvt_fs *fs, struct kvt_inode *p,
			    struct kvt_dir *pd, const char *name, struct fuse_file_info *fi)
{
	struct kvt_note note = { 0 };
	struct fuse_entry_param e;
	struct kvt_inode *ino;
	int ret = kvt_do_lookup(fs, p, pd, name, &e, &note);

	kvt_notify(fs, &note, true);
	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	ino = kvt_inode_of(fs, e.ino);
	ret = open_inode(fs, ino, fi, req);
	if (ret < 0) {
		kvt_forget(fs, ino, 1); /* the lookup the kernel never got */
		fuse_reply_err(req, -ret);
		return;
	}
	fuse_reply_create(req, &e, fi);
}

void kvt_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		   struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *p = kvt_inode_of(fs, parent), *ino;
	g_autoptr(kvt_dir) pd = NULL;
	struct fuse_entry_param e;
	struct kvt_handle *h;
	int ret;

	if (!S_ISREG(mode) && (mode & S_IFMT)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	ret = kvt_inode_dir_to_make(fs, p, &pd);
	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	kvt_inode_lock(p);
	ret = new_local_file(fs, p, pd, name, mode, fuse_req_ctx(req), &ino);
	if (ret == 0) {
		h = kvt_handle_new(fs);
		kvt_inode_lock(ino);
		h->wstage = kvt_stage_ref(ino->stage);
		open_writer(ino, fi, h, 0);
		kvt_inode_unlock(ino);
		kvt_fill_entry(fs, ino, NULL, &e);
	}
	kvt_inode_unlock(p);
	if (ret == -EEXIST && !(fi->flags & O_EXCL)) {
		/* Another mount made the name since the kernel last looked
		 * (its negative entry): open(2) without O_EXCL opens it. */
		create_existing(req, fs, p, pd, name, fi);
	} else if (ret < 0) {
		fuse_reply_err(req, -ret);
	} else {
		fuse_reply_create(req, &e, fi);
	}
}

void kvt_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		  dev_t rdev)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *p = kvt_inode_of(fs, parent), *ino = NULL;
	g_autoptr(kvt_dir) pd = NULL;
	struct fuse_entry_param e;
	int ret;

	if (!S_ISREG(mode)) {
		kvt_make_special(req, parent, name, mode, rdev);
		return;
	}
	ret = kvt_inode_dir_to_make(fs, p, &pd);
	if (ret == 0) {
		kvt_inode_lock(p);
		ret = new_local_file(fs, p, pd, name, mode, fuse_req_ctx(req), &ino);
		kvt_inode_unlock(p);
	}
	/* Nobody will write or close it: an empty file is complete now. */
	if (ret == 0)
		ret = kvt_publish_in_place(fs, ino, NULL);
	if (ret == 0) {
		kvt_fill_entry(fs, ino, NULL, &e);
		fuse_reply_entry(req, &e);
	} else {
		fuse_reply_err(req, -ret);
	}
}

/* Updates the record's atime so that evictors see reads. */
static void touch_atime(struct kvt_fs *fs, struct kvt_inode *ino)
{
	struct timespec now, ts[2];
	struct kvt_inode *p;
	struct kvt_dir *pd;
	struct stat st;
	int err;

	clock_gettime(CLOCK_REALTIME, &now);
	kvt_inode_lock(ino);
	if (now.tv_sec - ino->meta.st_atim.tv_sec < ATIME_REFRESH_SEC || !ino->has_record) {
		kvt_inode_unlock(ino);
		return;
	}
	ino->meta.st_atim = now;
	kvt_inode_unlock(ino);
	p = kvt_lock_parent(fs, ino, &pd, &err);
	if (!p)
		return;
	ts[0] = now;
	ts[1].tv_nsec = UTIME_OMIT;
	ts[1].tv_sec = 0;
	/* The record's new ctime is taken, or the next resolve would read
	 * the record again for a change that is ours. */
	if (kvt_dir_set_times(pd, ino->name, ts) == 0 && kvt_dir_stat(pd, ino->name, &st) == 0) {
		kvt_inode_lock(ino);
		if (ino->has_record && ino->rec_ino == st.st_ino)
			ino->rec_ctime = st.st_ctim;
		kvt_inode_unlock(ino);
	}
	kvt_inode_unlock(p);
	kvt_dir_unref(pd);
	/* An evictor's stat must see it, however long the kernel keeps
	 * attributes (share.h); attributes only, no page lock is waited
	 * for. */
	if (fs->se)
		fuse_lowlevel_notify_inval_inode(fs->se, kvt_nodeid_of(fs, ino), -1, 0);
}

/* @ino shows another version than @rec by now: it was replaced (rewritten
 * in place, renamed over) between our look at it and the open. */
static bool replaced_since(struct kvt_inode *ino, const struct kvt_record *rec)
{
	bool replaced;

	kvt_inode_lock(ino);
	replaced = !ino->has_record || strcmp(ino->rec.ref, rec->ref);
	kvt_inode_unlock(ino);
	return replaced;
}

/* @ino is still a child of its parent (or its parent cannot be opened to
 * tell): not unlinked, nor renamed over. */
static bool at_a_name(struct kvt_fs *fs, struct kvt_inode *ino)
{
	struct kvt_dir *pd;
	struct kvt_inode *p;
	int err;

	p = kvt_lock_parent(fs, ino, &pd, &err);
	if (p) {
		kvt_inode_unlock(p);
		kvt_dir_unref(pd);
	}
	return p || err;
}

/* The record that @ino's last name holds now, into @rec (an identity):
 * for @ino renamed over here after the kernel found it by that name, and
 * whose object went with its record, which another mount had replaced.
 * The kernel opens the inode it found; the open of the name gets what the
 * name holds.  -ENOENT when nothing whole is there. */
static int record_at_name(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_record *rec)
{
	g_autoptr(kvt_dir) pd = NULL;
	g_autofree char *name = NULL;
	struct kvt_record now;
	struct kvt_inode *p;
	struct stat st, ost;
	bool fresh;
	int ret;

	kvt_tree_lock(fs);
	p = ino->parent;
	if (p)
		kvt_inode_ref(p);
	name = g_strdup(ino->name);
	kvt_tree_unlock(fs);
	if (!p)
		return -ENOENT;
	kvt_record_init(&now);
	ret = kvt_inode_dir(fs, p, &pd);
	if (ret == 0)
		ret = kvt_name_lookup(fs->store, pd, name, false, -1, &now, &st, &ost, &fresh);
	kvt_inode_unref(fs, p);
	/* Torn (a lookup of the name purges it), or another kind now. */
	if (ret == KVT_LOOKUP_MISSING || ret == -EBADMSG ||
	    (ret == 0 && now.kind != KVT_KIND_FILE))
		ret = -ENOENT;
	if (ret == 0) {
		kvt_record_clear(rec);
		kvt_record_id(rec, &now);
	}
	kvt_record_clear(&now);
	return ret;
}

/* Opens @h->rec's object for reading and checks it: its size, and its
 * hash unless this mount found it intact before.  A torn object is purged;
 * the answer is then ENOENT (size: the name was never really there) or EIO
 * (hash); EAGAIN when the version was replaced meanwhile (or its object
 * found missing: the resolve that tells is done again). */
static int open_object(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_handle *h,
		       uid_t uid, struct kvt_note *note)
{
	struct kvt_torn_info torn = { 0 };
	struct kvt_verify_result res;
	struct stat st;
	int ret;

	h->fd = kvt_object_open(fs->store, &h->rec, O_RDONLY, &st);
	if ((h->fd == -ENOENT || h->fd == -EBADMSG) && !replaced_since(ino, &h->rec)) {
		/* Its object went with its record, replaced since we looked
		 * by another mount (whose publication released it); or it is
		 * torn.  Resolving again tells, and purges a torn name. */
		ret = kvt_resolve_inode(fs, ino, note);
		if (ret < 0)
			return ret;
		if (!replaced_since(ino, &h->rec) && !at_a_name(fs, ino)) {
			ret = record_at_name(fs, ino, &h->rec);
			if (ret < 0)
				return ret;
			h->fd = kvt_object_open(fs->store, &h->rec, O_RDONLY, &st);
		}
	}
	/* Replaced here or by another mount since we looked: again. */
	if (h->fd == -ENOENT || h->fd == -EBADMSG)
		return -EAGAIN;
	if (h->fd < 0)
		return h->fd;
	h->copy = kvt_copy_get(fs->copies, h->rec.size, uid);
	if (h->copy) {
		/* Served from the bytes hashed (verify.h). */
		ret = kvt_verify_fd_into(fs->verifier, h->fd, &st, &h->rec, &res, h->copy->map);
		close(h->fd);
		h->fd = h->copy->fd;
	} else {
		ret = kvt_verify_fd(fs->verifier, h->fd, &st, &h->rec, fs->verify_always, &res);
	}
	if (ret == 0)
		kvt_stat_add(&fs->stats, KVT_STAT_verified, 1);
	if (ret >= 0)
		return 0;
	if (ret == -ENODATA) {
		torn.why = KVT_TORN_SIZE;
		torn.found_size = res.found_size;
	} else if (ret == -EBADMSG) {
		torn.why = KVT_TORN_HASH;
		torn.found_hash = res.found_hash;
	} else {
		g_warning("reading object for verification: %s", g_strerror(-ret));
		return -EIO;
	}
	kvt_purge_inode(fs, ino, &h->rec, &torn, note);
	return ret == -ENODATA ? -ENOENT : -EIO;
}

/* Whether @req's caller is in group @gid by a supplementary group. */
static bool in_group(fuse_req_t req, gid_t gid)
{
	gid_t small[32];
	g_autofree gid_t *big = NULL;
	gid_t *list = small;
	int n = fuse_req_getgroups(req, G_N_ELEMENTS(small), small);

	if (n > (int)G_N_ELEMENTS(small)) {
		list = big = g_new(gid_t, n);
		n = MIN(n, fuse_req_getgroups(req, n, big));
	}
	for (int i = 0; i < n; i++)
		if (list[i] == gid)
			return true;
	return false;
}

/* The owner, group and other bits, as the kernel checks them (and did
 * already on a mount with default_permissions, which allow_other
 * implies; this check is for mounts without, and for a change another
 * mount made that the kernel's attributes do not show yet); root
 * passes.  The group is the caller's primary or any supplementary one:
 * a worker that shares a group with the writer opens what access(2)
 * lets it.  The groups are asked of the kernel (/proc) only when the
 * group bits decide. */
static bool may_open(struct kvt_inode *ino, fuse_req_t req, int flags)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	mode_t mode, want = 0;
	gid_t group;
	bool owner;

	if (ctx->uid == 0)
		return true;
	if ((flags & O_ACCMODE) != O_WRONLY)
		want |= S_IROTH;
	if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
		want |= S_IWOTH;
	kvt_inode_lock(ino);
	mode = ino->meta.st_mode;
	owner = ctx->uid == ino->meta.st_uid;
	group = ino->meta.st_gid;
	kvt_inode_unlock(ino);
	if (owner)
		return ((mode >> 6) & want) == want;
	if (((mode >> 3) & want) != (mode & want) &&
	    (ctx->gid == group || in_group(req, group)))
		return ((mode >> 3) & want) == want;
	return (mode & want) == want;
}

/* How a reader of a published object is served (caller holds ino->lock). */
static void open_reader(struct kvt_inode *ino, struct fuse_file_info *fi, struct kvt_handle *h)
{
	if (ino->rewritten || ino->writers || !ino->has_record ||
	    strcmp(ino->rec.ref, h->rec.ref) ||
	    (ino->cache_readers && strcmp(ino->cache_ref, h->rec.ref))) {
		/* The kernel clamps cached and O_DIRECT reads to its idea of
		 * the size, which a writer in place (LMCache) may move under
		 * readers; readers of an older version may share the page
		 * cache too.  Such a reader is served from its own object
		 * only, whatever the kernel thinks the size is. */
		fi->direct_io = 1;
	} else {
		bool same = !strcmp(ino->cache_ref, h->rec.ref);

		/* The kernel drops the pages of the version before only
		 * after it has the reply to the first open without
		 * keep_cache; an open of the same version meanwhile must
		 * not keep them either, or its read mixes the old pages
		 * with the new bytes (another mount replaced the version
		 * under this inode).  A read of this version's reader
		 * comes after its open: from then on the pages are its. */
		fi->keep_cache = same && __atomic_load_n(&ino->cache_settled, __ATOMIC_ACQUIRE);
		if (!same) {
			g_strlcpy(ino->cache_ref, h->rec.ref, sizeof(ino->cache_ref));
			__atomic_store_n(&ino->cache_settled, false, __ATOMIC_RELEASE);
		}
		ino->cache_readers++;
		h->cached = true;
	}
}

/* How often an open looks again at a version replaced (here, or by
 * another mount) between its look at the name and the open of the
 * object, before it answers EIO: as often as a lookup does (name.c).
 * Two hosts rewriting one name in place every few milliseconds made an
 * open lose eight times in a row. */
#define OPEN_TRIES 64

/* Opens @ino as @fi asks, for @req's process: fi->fh gets the handle. */
static int open_inode(struct kvt_fs *fs, struct kvt_inode *ino, struct fuse_file_info *fi,
		      fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct kvt_note note = { 0 };
	struct kvt_handle *h;
	bool ref_inode = false, published = false, reader = (fi->flags & O_ACCMODE) == O_RDONLY;
	int ret = 0;

	if (ino->is_dir)
		return -EISDIR;
	kvt_inode_lock(ino);
	/* The kernel opens links and special files itself. */
	ret = ino->has_record && ino->rec.kind != KVT_KIND_FILE ? -EINVAL : 0;
	kvt_inode_unlock(ino);
	if (ret < 0)
		return ret;
	if (!may_open(ino, req, fi->flags))
		return -EACCES;
	h = kvt_handle_new(fs);
	/* A writer in place may replace the version between our look at
	 * the inode and the open of its object: then look again. */
	for (int attempt = 0; reader && attempt < OPEN_TRIES; attempt++) {
		kvt_notify(fs, &note, true);
		ret = kvt_resolve_inode_to_open(fs, ino, &note);
		kvt_inode_lock(ino);
		published = ino->has_record;
		if (published) {
			kvt_record_id(&h->rec, &ino->rec);
			h->purges = __atomic_load_n(&ino->purges, __ATOMIC_ACQUIRE);
			/* Under the file's lock, which an eviction takes too
			 * (cull.c): a load is never evicted from under it. */
			if (h->evict_key != (uint64_t)ino->rec_ino) {
				kvt_evictor_unpin(fs->store, h->evict_key);
				h->evict_key = (uint64_t)ino->rec_ino;
				kvt_evictor_pin(fs->store, h->evict_key, true);
			}
		}
		kvt_inode_unlock(ino);
		if (ret == 0 && published)
			ret = open_object(fs, ino, h, ctx->uid, &note);
		/* ESTALE: another mount's version took the name, and @ino
		 * is detached from it now; the kernel's entry goes (@note),
		 * but this open goes on, on the detached inode, which serves
		 * what the name holds (open_object, open_reader). */
		if (ret != -EAGAIN && ret != -ESTALE)
			break;
	}
	if (ret == -EAGAIN || ret == -ESTALE)
		ret = -EIO; /* replaced every time we looked */
	kvt_inode_lock(ino);
	if (ret < 0) {
		/* torn or gone */
	} else if (!reader) {
		/* A new version starts with O_TRUNC or the first write; an
		 * open for writing that writes nothing (touch) changes
		 * nothing. */
		ret = kvt_version_room(fs, ino, ctx->pid, ctx->uid);
		if (ret == 0 && (fi->flags & O_TRUNC))
			ret = kvt_version_begin(fs, ino, true, ctx->uid, &ref_inode, &h->wstage);
		if (ret == 0)
			open_writer(ino, fi, h, ctx->pid);
	} else if (h->fd >= 0) {
		open_reader(ino, fi, h);
	} else if (ino->stage && ino->writers == 0 && kvt_stage_error(ino->stage)) {
		/* Its publication failed on a write that did not land: the
		 * bytes have a hole. */
		ret = -EIO;
	} else if (ino->stage && ino->writers == 0) {
		/* A finished but unpublished file: a closed temp file, or one
		 * whose publication failed, bytes whole. */
		h->rstage = kvt_stage_ref(ino->stage);
		fi->direct_io = 1;
	} else {
		/* Still being written under its own name: a reader sees
		 * nothing rather than part of it. */
		ret = -ENOENT;
	}
	kvt_inode_unlock(ino);
	if (ref_inode)
		kvt_inode_ref(ino);
	kvt_notify(fs, &note, true);
	if (ret < 0) {
		kvt_handle_close(fs, h);
		return ret;
	}
	if (!h->writer) {
		fi->noflush = 1;
		if (h->fd >= 0) {
			kvt_stat_add(&fs->stats, KVT_STAT_loads, 1);
			touch_atime(fs, ino);
		}
	}
	fi->fh = (uintptr_t)h;
	return 0;
}

void kvt_op_open(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	int ret;

	ret = open_inode(fs, kvt_inode_of(fs, n), fi, req);
	if (ret < 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_open(req, fi);
}

/* A read of a published object: EIO once the version was purged, and
 * EIO (with a purge) when the lower file holds fewer bytes than recorded;
 * a short reply would make the kernel take it as the end of the file.
 * The bytes go by splice when they can, else through a buffer.  Returns
 * the bytes replied, or -errno for the caller to reply. */
static ssize_t read_object(fuse_req_t req, struct kvt_fs *fs, struct kvt_inode *ino,
			   struct kvt_handle *h, size_t size, off_t off,
			   struct kvt_note *note)
{
	uint64_t want = (uint64_t)off >= h->rec.size ? 0 : MIN(size, h->rec.size - off);
	struct kvt_torn_info torn = { .why = KVT_TORN_SHORT };
	g_autofree char *buf = NULL;
	size_t have = 0;
	struct stat st;
	ssize_t got;
	int rfd;

	if (__atomic_load_n(&ino->purges, __ATOMIC_ACQUIRE) != h->purges)
		return -EIO;
	got = kvt_object_fault(KVT_FAULT_SERVE, &h->rec);
	if (got < 0)
		return got;
	/* A read of several requests must fail at its first one: the kernel
	 * returns what the earlier ones got when a later one fails.  A
	 * verified copy holds the whole object: nothing to look at. */
	if (want && !h->copy && kvt_file_stat(h->fd, NULL, &st) == 0 &&
	    (uint64_t)st.st_size < h->rec.size) {
		torn.found_size = st.st_size;
		kvt_purge_inode(fs, ino, &h->rec, &torn, note);
		return -EIO;
	}
	rfd = want ? kvt_splice_fill(h->fd, off, want, &have) : -ENOSYS;
	if (rfd >= 0) {
		struct fuse_bufvec bv = FUSE_BUFVEC_INIT(want);

		bv.buf[0].flags = FUSE_BUF_IS_FD;
		bv.buf[0].fd = rfd;
		fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
		kvt_splice_reset(rfd);
		return want;
	}
	if (rfd == -ENODATA) {
		got = have;
	} else {
		buf = g_malloc(want ? want : 1);
		got = kvt_pread_full(h->fd, buf, want, off);
		if (got < 0)
			return kvt_lower_failed("read", h->rec.ref, (int)-got);
	}
	if ((uint64_t)got == want) {
		fuse_reply_buf(req, buf, got);
		return got;
	}
	torn.found_size = off + got;
	kvt_purge_inode(fs, ino, &h->rec, &torn, note);
	return -EIO;
}

void kvt_op_read(fuse_req_t req, fuse_ino_t n, size_t size, off_t off,
		 struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *ino = kvt_inode_of(fs, n);
	struct kvt_handle *h = kvt_handle_of(fi);
	struct kvt_note note = { 0 };
	struct kvt_stage *st = NULL;
	g_autofree char *buf = NULL;
	ssize_t got;

	if (!h->writer && !h->rstage) {
		/* see open_reader */
		if (h->cached && !__atomic_load_n(&ino->cache_settled, __ATOMIC_ACQUIRE)) {
			kvt_inode_lock(ino);
			if (!strcmp(ino->cache_ref, h->rec.ref))
				__atomic_store_n(&ino->cache_settled, true, __ATOMIC_RELEASE);
			kvt_inode_unlock(ino);
		}
		got = read_object(req, fs, ino, h, size, off, &note);
		if (got < 0) {
			kvt_notify(fs, &note, true);
			fuse_reply_err(req, (int)-got);
		} else {
			kvt_stat_add(&fs->stats, KVT_STAT_bytes_out, got);
		}
		return;
	}
	buf = g_malloc(size ? size : 1);
	if (h->writer) {
		int ret = kvt_version_for_write(fs, ino, fuse_req_ctx(req)->uid, &h->wstage, &st,
						NULL);

		if (ret < 0) {
			fuse_reply_err(req, -ret);
			return;
		}
		got = kvt_stage_read(st, buf, size, off);
		kvt_version_put(st);
	} else if (kvt_stage_error(h->rstage)) {
		got = -EIO; /* a writer opened it again, and lost a write */
	} else {
		got = kvt_stage_read(h->rstage, buf, size, off);
	}
	if (got < 0) {
		fuse_reply_err(req, (int)-got);
	} else {
		kvt_stat_add(&fs->stats, KVT_STAT_bytes_out, got);
		fuse_reply_buf(req, buf, got);
	}
}

/* A write by someone without the power to keep them clears the set-user-ID
 * bit, and the set-group-ID bit of a group-executable file, as the kernel
 * does for its own file systems (the kernel leaves it to us on the direct
 * I/O path writers use here).  The write is the file's last change: times
 * the client set before are the write's now (the record takes the time of
 * its publication), and ctime is now. */
static void note_write(struct kvt_inode *ino, const struct fuse_ctx *ctx)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	kvt_inode_lock(ino);
	ino->times_set = 0;
	ino->meta.st_mtim = ino->meta.st_ctim = now;
	if (ctx->uid != 0 && (ino->meta.st_mode & S_ISUID ||
			      (ino->meta.st_mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP)))
		ino->meta.st_mode &= ~(S_ISUID | (ino->meta.st_mode & S_IXGRP ? S_ISGID : 0));
	kvt_inode_unlock(ino);
}

void kvt_op_write(fuse_req_t req, fuse_ino_t n, const char *buf, size_t size, off_t off,
		  struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_stage *st;
	int ret;

	struct kvt_inode *ino = kvt_inode_of(fs, n);
	struct kvt_handle *h = kvt_handle_of(fi);

	note_write(ino, fuse_req_ctx(req));
	if (__atomic_load_n(&h->fresh, __ATOMIC_RELAXED)) {
		kvt_inode_lock(ino);
		kvt_handle_unfresh(ino, h);
		kvt_inode_unlock(ino);
	}
	ret = kvt_version_for_write(fs, ino, fuse_req_ctx(req)->uid, &h->wstage, &st, NULL);
	if (ret == 0) {
		const char *data = kvt_receive_payload(buf);

		/* The bytes the stage will hold on the lower disk, charged
		 * to whoever began it (bounds.h). */
		ret = kvt_bounds_stage_grow(fs, st, (uint64_t)off + size);
		if (ret == 0 && data != buf)
			kvt_stat_add(&fs->stats, KVT_STAT_aligned_writes, 1);
		if (ret == 0)
			ret = kvt_stage_write(st, data, size, off);
		kvt_version_put(st);
	}
	if (ret < 0) {
		fuse_reply_err(req, -ret);
	} else {
		kvt_stat_add(&fs->stats, KVT_STAT_bytes_in, size);
		fuse_reply_write(req, size);
	}
}

/* Only what this handle wrote: another writer's version is its to
 * publish (a touch of a file being written publishes nothing). */
static int publish_own(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_handle *h)
{
	return h->writer && h->wstage ? kvt_publish_in_place(fs, ino, h->wstage) : 0;
}

void kvt_op_flush(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);

	fuse_reply_err(req, -publish_own(fs, kvt_inode_of(fs, n), kvt_handle_of(fi)));
}

/* The published version of @ino made durable (publish.c says what that
 * takes).  A file never published (a temp name) has nothing that would
 * survive a remount anyway. */
static int sync_published(struct kvt_fs *fs, struct kvt_inode *ino)
{
	struct kvt_record rec;
	struct kvt_inode *p;
	struct kvt_dir *pd;
	int ret;

	p = kvt_lock_parent(fs, ino, &pd, &ret);
	if (!p)
		return ret;
	kvt_inode_lock(ino);
	kvt_record_id(&rec, &ino->rec);
	kvt_inode_unlock(ino);
	ret = rec.ref[0] ? kvt_store_sync_name(fs->store, pd, ino->name, &rec) : 0;
	kvt_inode_unlock(p);
	kvt_dir_unref(pd);
	return ret;
}

void kvt_op_fsync(fuse_req_t req, fuse_ino_t n, int datasync, struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *ino = kvt_inode_of(fs, n);
	int ret = publish_own(fs, ino, kvt_handle_of(fi));

	if (ret == 0)
		ret = sync_published(fs, ino);
	fuse_reply_err(req, -ret);
}

/* Whether the name @st describes is the caller's (@data: its uid). */
static bool owned_by(const struct kvt_record *rec, const struct stat *st, void *data)
{
	(void)rec;
	return st->st_uid == *(const uid_t *)data;
}

/* fsync(2) of a directory: the names published in it durable, with
 * their bytes (publish.c), as a client that renamed temp files into it
 * and then synced it expects.  Without this the kernel takes ENOSYS for
 * success, and the sync would silently do nothing.  The bytes synced are
 * the caller's names' only (root's: all): a directory anyone may read
 * holds other users' names, and syncing them all cost one user's fsync
 * the whole directory's bytes, a FUSE thread held meanwhile.  Every entry
 * is made durable all the same, with the directory. */
void kvt_op_fsyncdir(fuse_req_t req, fuse_ino_t n, int datasync, struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	g_autoptr(kvt_dir) d = NULL;
	uid_t uid = fuse_req_ctx(req)->uid;
	int ret = kvt_inode_dir(fs, kvt_inode_of(fs, n), &d);

	if (ret == 0)
		ret = kvt_store_sync_dir(fs->store, d, uid == 0 ? NULL : owned_by, &uid);
	fuse_reply_err(req, -ret);
}

void kvt_op_release(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *ino = kvt_inode_of(fs, n);
	struct kvt_handle *h = kvt_handle_of(fi);

	kvt_inode_lock(ino);
	if (h->writer)
		ino->writers--;
	kvt_handle_unfresh(ino, h);
	if (h->cached && --ino->cache_readers == 0)
		g_cond_broadcast(&ino->published); /* kvt_version_room */
	kvt_inode_unlock(ino);
	kvt_handle_close(fs, h);
	fuse_reply_err(req, 0);
}
