/* FUSE low-level callbacks: translate kernel requests into inode-table and
 * store operations.  Publication happens here because only the FUSE layer
 * knows when a client is done (FLUSH, fsync, rename), never at RELEASE. */
#include "fuse_ops.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "inode.h"
#include "io.h"
#include "purge.h"
#include "splice.h"
#include "xattr.h"

/* Reads refresh the record's atime at most this often (an evictor reads
 * it; rewriting it on every load would cost a lower metadata write). */
#define ATIME_REFRESH_SEC 10

struct kvt_handle {
	int fd;                /* readers: object (or finished stage) bytes */
	struct kvt_record rec; /* readers of an object: which one (no xattrs) */
	guint purges;          /* the inode's purge count at open */
	struct kvt_stage *rstage; /* readers of an unpublished file */
	struct kvt_stage *wstage; /* writers: the version this handle writes */
	bool writer;
	bool cached;           /* counted in cache_readers */
};

struct dir_entry {
	char *name;
	unsigned char type;
};

struct dir_handle {
	GArray *entries;       /* struct dir_entry */
};

/* Attributes of a file, under its lock. */
static void file_attr(struct kvt_inode *ino, struct stat *st)
{
	*st = ino->meta;
	st->st_ino = ino->serial;
	st->st_nlink = 1;
	if (!ino->has_record) {
		st->st_size = ino->stage ? (off_t)__atomic_load_n(&ino->stage->size,
								    __ATOMIC_RELAXED) : 0;
		st->st_blocks = (st->st_size + 511) / 512;
	} else {
		st->st_size = ino->rec.size;
		st->st_blocks = ino->blocks;
	}
}

static int inode_attr(struct kvt_inode *ino, struct stat *st)
{
	if (ino->is_dir) {
		if (fstat(ino->fd, st))
			return -errno;
		st->st_ino = ino->serial;
		return 0;
	}
	g_mutex_lock(&ino->lock);
	file_attr(ino, st);
	g_mutex_unlock(&ino->lock);
	return 0;
}

static void fill_entry(struct kvt_fs *fs, struct kvt_inode *ino,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = kvt_nodeid_of(fs, ino);
	e->attr_timeout = fs->attr_timeout;
	e->entry_timeout = fs->entry_timeout;
	inode_attr(ino, &e->attr);
}

/* Enters a file the kernel now knows into fs->lru, and asks the kernel
 * to drop the oldest names past fs->max_inodes (caller holds the parent's
 * lock, which keeps ino->name). */
static void lru_add(struct kvt_fs *fs, struct kvt_inode *ino)
{
	struct kvt_lru_entry *e = g_new0(struct kvt_lru_entry, 1);
	struct kvt_purge_note drop[16];
	int n = 0;

	e->link.data = e;
	e->ino = ino;
	e->parent = kvt_nodeid_of(fs, ino->parent);
	e->name = g_strdup(ino->name);
	g_mutex_lock(&fs->lru_lock);
	ino->lru = e;
	g_queue_push_tail_link(&fs->lru, &e->link);
	while (fs->lru.length > fs->max_inodes && n < (int)G_N_ELEMENTS(drop)) {
		struct kvt_lru_entry *old = g_queue_pop_head_link(&fs->lru)->data;

		old->ino->lru = NULL;
		drop[n++] = (struct kvt_purge_note){ .parent = old->parent, .name = old->name };
		g_free(old);
	}
	g_mutex_unlock(&fs->lru_lock);
	for (int i = 0; i < n; i++)
		kvt_purge_notify(fs, &drop[i], false);
}

/* One more kernel lookup of @ino; caller holds the parent's lock. */
static void count_lookup(struct kvt_fs *fs, struct kvt_inode *ino)
{
	if (ino->nlookup++ == 0) {
		kvt_inode_ref(ino);
		if (!ino->is_dir && !ino->lru)
			lru_add(fs, ino);
	}
}

/* Takes a published record into @ino (caller holds ino->lock). */
static void inode_take_record(struct kvt_inode *ino, struct kvt_record *rec,
			      const struct stat *rst, const struct stat *ost)
{
	kvt_record_clear(&ino->rec);
	ino->rec = *rec;
	kvt_record_init(rec);
	ino->has_record = true;
	ino->meta = *rst;
	ino->rec_ino = rst->st_ino;
	ino->rec_ctime = rst->st_ctim;
	ino->blocks = ost ? ost->st_blocks : (blkcnt_t)((ino->rec.size + 511) / 512);
}

/* Clears a pending stage from an inode that no longer needs it; returns
 * true when the caller must drop the inode's pending reference. */
static bool inode_drop_stage(struct kvt_fs *fs, struct kvt_inode *ino)
{
	struct kvt_stage *st;

	g_mutex_lock(&ino->lock);
	st = ino->stage;
	ino->stage = NULL;
	g_mutex_unlock(&ino->lock);
	if (!st)
		return false;
	kvt_stage_put(fs->store, st);
	return true;
}

/* The identity of a record (hash, size, reference), without xattrs. */
static void record_id(struct kvt_record *dst, const struct kvt_record *src)
{
	kvt_record_init(dst);
	dst->hash = src->hash;
	dst->size = src->size;
	memcpy(dst->ref, src->ref, sizeof(dst->ref));
}

/* Resolves the published file @p/@name, whose record file @st describes,
 * into *@childp (an inode already known for the name, or NULL): rereads the
 * record if the lower one changed and checks its object's size.  A torn
 * name is purged (@note says what the kernel must forget) and answers
 * ENOENT.  Caller holds p->lock. */
static int resolve_file_locked(struct kvt_fs *fs, struct kvt_inode *p, const char *name,
			       struct stat *st, struct kvt_inode **childp,
			       struct kvt_purge_note *note)
{
	struct kvt_inode *child = *childp, *file = child && !child->is_dir ? child : NULL;
	struct kvt_torn_info torn = { 0 };
	struct kvt_record rec;
	struct stat ost;
	bool same = false, is_torn = true;
	int ret;

	kvt_record_init(&rec);
	if (file) {
		g_mutex_lock(&file->lock);
		same = file->has_record && file->rec_ino == st->st_ino &&
		       file->rec_ctime.tv_sec == st->st_ctim.tv_sec &&
		       file->rec_ctime.tv_nsec == st->st_ctim.tv_nsec;
		if (same)
			record_id(&rec, &file->rec);
		g_mutex_unlock(&file->lock);
	}
	if (!same) {
		ret = kvt_record_read(fs->store, p->fd, name, &rec, st);
		if (ret == -EBADMSG) {
			torn.why = KVT_TORN_RECORD;
			kvt_purge_locked(fs, p, name, file, NULL, &torn, note);
			return -ENOENT;
		}
		if (ret < 0)
			return ret;
	}
	if (kvt_object_stat(fs->store, &rec, &ost)) {
		if (errno != ENOENT) {
			ret = -errno;
			kvt_record_clear(&rec);
			return ret;
		}
		torn.why = KVT_TORN_MISSING;
	} else if ((uint64_t)ost.st_size != rec.size) {
		torn.why = KVT_TORN_SIZE;
		torn.found_size = ost.st_size;
	} else {
		is_torn = false;
	}
	if (is_torn) {
		kvt_purge_locked(fs, p, name, file, &rec, &torn, note);
		kvt_record_clear(&rec);
		return -ENOENT;
	}
	if (!file) {
		if (child)
			kvt_inode_detach(child);
		file = kvt_inode_new_file(p, name);
		kvt_inode_attach(p, file);
	}
	g_mutex_lock(&file->lock);
	if (same)
		file->blocks = ost.st_blocks;
	else
		inode_take_record(file, &rec, st, &ost);
	g_mutex_unlock(&file->lock);
	kvt_record_clear(&rec);
	*childp = file;
	return 0;
}

/* At OPEN and GETATTR: checks that @ino's name still resolves to a whole
 * object (see resolve_file_locked).  A file unlinked while the kernel
 * holds it is served from memory for as long as its object exists. */
static int resolve_inode(struct kvt_fs *fs, struct kvt_inode *ino,
			 struct kvt_purge_note *note)
{
	struct kvt_inode *p, *child = ino;
	struct stat st;
	bool published;
	int ret = 0;

	if (ino->is_dir)
		return 0;
	g_mutex_lock(&ino->lock);
	published = ino->has_record;
	g_mutex_unlock(&ino->lock);
	if (!published)
		return 0; /* pending: nothing on the lower disk to check yet */
	p = kvt_lock_parent(fs, ino);
	if (!p)
		return 0;
	if (fstatat(p->fd, ino->name, &st, AT_SYMLINK_NOFOLLOW)) {
		ret = -errno;
		if (ret == -ENOENT) /* another mount removed it */
			kvt_inode_detach(ino);
	} else if (!S_ISREG(st.st_mode)) {
		ret = -ENOENT;
	} else {
		ret = resolve_file_locked(fs, p, ino->name, &st, &child, note);
	}
	g_mutex_unlock(&p->lock);
	return ret;
}

static int do_lookup(struct kvt_fs *fs, struct kvt_inode *parent, const char *name,
		     struct fuse_entry_param *e, struct kvt_purge_note *note)
{
	struct kvt_inode *child;
	struct stat st;
	int ret = 0;

	if (strlen(name) > NAME_MAX)
		return -ENAMETOOLONG;
	g_mutex_lock(&parent->lock);
	child = g_hash_table_lookup(parent->children, name);
	if (child && !child->is_dir) {
		bool local;

		g_mutex_lock(&child->lock);
		local = !child->has_record && child->stage;
		g_mutex_unlock(&child->lock);
		if (local)
			goto found; /* being written here: not on the lower disk yet */
	}
	if (fstatat(parent->fd, name, &st, AT_SYMLINK_NOFOLLOW)) {
		ret = -errno;
		if (child)
			kvt_inode_detach(child);
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		int fd;

		if (child && child->is_dir && child->lower_ino == st.st_ino &&
		    child->dev == st.st_dev)
			goto found;
		fd = openat(parent->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			ret = -errno;
			goto out;
		}
		if (child)
			kvt_inode_detach(child);
		child = kvt_inode_new_dir(parent, name, fd, &st);
		kvt_inode_attach(parent, child);
		goto found;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -ENOENT; /* nothing kvtierfs wrote */
		goto out;
	}
	ret = resolve_file_locked(fs, parent, name, &st, &child, note);
	if (ret < 0)
		goto out;
found:
	count_lookup(fs, child);
	fill_entry(fs, child, e);
out:
	g_mutex_unlock(&parent->lock);
	return ret;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	/* No atomic O_TRUNC: with it the kernel sets its size of the file to
	 * 0 at the open and lets it follow the writer, and every reader of
	 * the published version sees that size (LMCache rewrites in place).
	 * Without it O_TRUNC arrives as a SETATTR of size 0 on the new
	 * handle, which starts the handle's own version (set_size), and the
	 * size the kernel keeps is the published one. */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* Object bytes go from the lower page cache to the device by splice
	 * (see splice.h). */
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	if (conn->capable & FUSE_CAP_SPLICE_MOVE)
		conn->want |= FUSE_CAP_SPLICE_MOVE;
	/* Writes must reach the daemon before close() returns so that
	 * FLUSH and rename see every byte. */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->max_write = 1u << 20;
	conn->max_read = KVT_MAX_READ;
	conn->max_readahead = 1u << 20;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_purge_note note = { 0 };
	struct fuse_entry_param e;
	int ret = do_lookup(fs, kvt_inode_of(fs, parent), name, &e, &note);

	kvt_stat_add(&fs->stats, KVT_STAT_lookups, 1);
	kvt_stat_add(&fs->stats, ret == 0 ? KVT_STAT_hits : KVT_STAT_misses, 1);
	if (ret == -ENOENT && fs->negative_timeout > 0) {
		/* A negative entry: repeated misses (a prefix that is not
		 * stored) stay in the kernel.  Names created through this
		 * mount replace it; another mount's stores show after the
		 * timeout. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = fs->negative_timeout;
		fuse_reply_entry(req, &e);
	} else if (ret < 0) {
		fuse_reply_err(req, -ret);
	} else {
		fuse_reply_entry(req, &e);
	}
	/* The ENOENT reply drops the dentry; the inode may be cached too. */
	kvt_purge_notify(fs, &note, false);
}

static void forget_one(struct kvt_fs *fs, struct kvt_inode *ino, uint64_t n)
{
	struct kvt_inode *p;
	bool last;

	if (ino == fs->root)
		return;
	g_mutex_lock(&fs->tree_lock);
	p = ino->parent;
	g_mutex_lock(&p->lock);
	g_mutex_unlock(&fs->tree_lock);
	g_assert(ino->nlookup >= n);
	ino->nlookup -= n;
	last = ino->nlookup == 0;
	g_mutex_unlock(&p->lock);
	if (last)
		kvt_inode_unref(fs, ino);
}

static void op_forget(fuse_req_t req, fuse_ino_t n, uint64_t nlookup)
{
	struct kvt_fs *fs = kvt_fs_of(req);

	forget_one(fs, kvt_inode_of(fs, n), nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct kvt_fs *fs = kvt_fs_of(req);

	for (size_t i = 0; i < count; i++)
		forget_one(fs, kvt_inode_of(fs, forgets[i].ino), forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *ino = kvt_inode_of(fs, n);
	struct kvt_purge_note note = { 0 };
	struct stat st;
	int ret = resolve_inode(fs, ino, &note);

	kvt_purge_notify(fs, &note, true);
	if (ret == 0)
		ret = inode_attr(ino, &st);
	if (ret < 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, fs->attr_timeout);
}

static void op_statfs(fuse_req_t req, fuse_ino_t n)
{
	struct statvfs sv;

	if (fstatvfs(kvt_fs_of(req)->store->lowerfd, &sv))
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

/* Publishes the version @st of @ino (NULL: the latest one pending) as an
 * object.  Returns 1 when there was nothing to publish, -errno when
 * nothing was published, or 0 with @rec filled and *@pub the stage, for
 * publish_done() once the record is installed or could not be. */
static int publish_object(struct kvt_fs *fs, struct kvt_inode *ino,
			  struct kvt_stage *st, struct kvt_record *rec,
			  struct kvt_stage **pub)
{
	kvt_hash hash;
	int ret;

	g_mutex_lock(&ino->lock);
	if (!st)
		st = ino->stage;
	if (!st || st->consumed) {
		g_mutex_unlock(&ino->lock);
		return 1;
	}
	kvt_stage_ref(st);
	kvt_record_init(rec);
	if (ino->rec.xattrs && g_hash_table_size(ino->rec.xattrs))
		rec->xattrs = kvt_xattrs_dup(ino->rec.xattrs);
	g_mutex_unlock(&ino->lock);

	/* Exclusive against writers: no byte may land in the staged file
	 * once it has become an immutable object. */
	g_rw_lock_writer_lock(&st->io);
	if (st->consumed)
		ret = 1;
	else if (st->error)
		ret = -st->error;
	else if (kvt_stage_hash(st, st->size, &hash))
		ret = kvt_object_publish_hashed(fs->store, st->name, st->size, &hash, rec);
	else
		ret = kvt_object_publish(fs->store, st->fd, st->name, st->size, rec);
	if (ret == 0)
		st->consumed = true;
	g_rw_lock_writer_unlock(&st->io);
	if (ret) {
		kvt_stage_put(fs->store, st);
		kvt_record_clear(rec);
	} else {
		*pub = st;
	}
	return ret;
}

/* Ends a publication.  Done: the staged name goes, the object has its own
 * now.  Not done (no record could be installed): the object goes and the
 * version is pending again, its bytes intact, to be published by the next
 * rename or flush. */
static void publish_done(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_stage *pub,
			 const struct kvt_record *rec, bool done)
{
	if (done) {
		kvt_stage_discard(fs->store, pub->name);
	} else {
		kvt_object_release(fs->store, rec);
		g_rw_lock_writer_lock(&pub->io);
		pub->consumed = false;
		g_rw_lock_writer_unlock(&pub->io);
	}
	g_mutex_lock(&ino->lock);
	g_cond_broadcast(&ino->published);
	g_mutex_unlock(&ino->lock);
	kvt_stage_put(fs->store, pub);
}

/* After a record for @rec was installed at @ino's name: @ino shows it.
 * Returns true when the caller must drop the inode's pending reference,
 * which it does once it holds no directory lock. */
static bool inode_published(struct kvt_fs *fs, struct kvt_inode *ino,
			    struct kvt_record *rec, int dirfd, const char *name,
			    bool in_place)
{
	struct stat rst, ost;
	bool drop = false;

	kvt_stat_add(&fs->stats, KVT_STAT_stores, 1);
	if (fstatat(dirfd, name, &rst, AT_SYMLINK_NOFOLLOW))
		memset(&rst, 0, sizeof(rst));
	if (kvt_object_stat(fs->store, rec, &ost))
		memset(&ost, 0, sizeof(ost));
	g_mutex_lock(&ino->lock);
	/* Written under its own name: the next version will be too, and its
	 * writer moves the kernel's size under readers (see op_open). */
	if (in_place)
		ino->rewritten = true;
	if (ino->stage && ino->stage->consumed) {
		kvt_stage_put(fs->store, ino->stage);
		ino->stage = NULL;
		drop = true;
	}
	rst.st_mode = (rst.st_mode & S_IFMT) | (ino->meta.st_mode & 07777);
	inode_take_record(ino, rec, &rst, &ost);
	g_mutex_unlock(&ino->lock);
	return drop;
}

static void release_replaced(struct kvt_fs *fs, struct kvt_record *old,
			     const struct kvt_record *now)
{
	if (old->ref[0] && (!now || strcmp(old->ref, now->ref)))
		kvt_object_release(fs->store, old);
	kvt_record_clear(old);
}

/* Publication of a file written under its own name (FLUSH, fsync): the
 * version @st (NULL: the latest pending one). */
static int publish_in_place(struct kvt_fs *fs, struct kvt_inode *ino,
			    struct kvt_stage *st)
{
	struct kvt_record rec, old;
	struct kvt_stage *pub = NULL;
	struct kvt_inode *p;
	struct kvt_meta meta;
	bool tmp, drop = false;
	int ret;

	p = kvt_lock_parent(fs, ino);
	if (!p)
		return 0; /* unlinked while open: nothing to publish */
	tmp = kvt_is_tmp_name(fs, ino->name);
	g_mutex_unlock(&p->lock);
	if (tmp)
		return 0;

	ret = publish_object(fs, ino, st, &rec, &pub);
	if (ret)
		return ret > 0 ? 0 : ret;
	p = kvt_lock_parent(fs, ino);
	if (!p) {
		publish_done(fs, ino, pub, &rec, false);
		kvt_record_clear(&rec);
		return 0;
	}
	g_mutex_lock(&ino->lock);
	meta = kvt_inode_meta(ino, false);
	g_mutex_unlock(&ino->lock);
	ret = kvt_record_install(fs->store, p->fd, ino->name, &rec, &meta, &old);
	if (ret == 0) {
		release_replaced(fs, &old, &rec);
		drop = inode_published(fs, ino, &rec, p->fd, ino->name, true);
	}
	g_mutex_unlock(&p->lock);
	publish_done(fs, ino, pub, &rec, ret == 0);
	if (drop)
		kvt_inode_unref(fs, ino);
	kvt_record_clear(&rec);
	if (ret == 0 && fs->se)
		/* The kernel's cached size may be another version's. */
		fuse_lowlevel_notify_inval_inode(fs->se, kvt_nodeid_of(fs, ino), -1, 0);
	return ret;
}

/* The version a writer writes, referenced in *@out (caller holds
 * ino->lock).  O_TRUNC starts a version of its own, so that two writers
 * of one name (LMCache processes) never publish a mix of theirs; without
 * it a writer joins the version pending, or starts one from the
 * published bytes. */
static int inode_begin_write(struct kvt_fs *fs, struct kvt_inode *ino, bool trunc,
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
	 * publication ends with (see writer_stage). */
	if (!trunc && ino->stage && ino->stage->consumed)
		return -EAGAIN;
	ret = kvt_stage_new(fs, ino, trunc ? 0 : UINT64_MAX, &st);
	if (ret < 0)
		return ret;
	if (ino->has_record)
		ino->rewritten = true;
	if (ino->stage)
		kvt_stage_put(fs->store, ino->stage);
	else
		*ref_inode = true;
	ino->stage = st;
	*out = kvt_stage_ref(st);
	return 0;
}

static void open_writer(struct kvt_fs *fs, struct kvt_inode *ino,
			struct fuse_file_info *fi, struct kvt_handle *h)
{
	h->writer = true;
	h->fd = -1;
	ino->writers++;
	/* Writes bypass the page cache so that it only ever holds published
	 * bytes, which readers of older versions may share.  O_DIRECT ones
	 * do anyway, and on the kernel's own direct I/O path the requests of
	 * one large write are sent in parallel, not one after the other. */
	if (!(fi->flags & O_DIRECT))
		fi->direct_io = 1;
	fi->fh = (uintptr_t)h;
}

/* A new pending file at @p/@name (caller holds p->lock). */
static int new_pending_file(struct kvt_fs *fs, struct kvt_inode *p, const char *name,
			    mode_t mode, const struct fuse_ctx *ctx,
			    struct kvt_inode **out)
{
	struct kvt_inode *ino;
	struct stat st;
	int ret;

	if (strlen(name) > NAME_MAX)
		return -ENAMETOOLONG;
	if (g_hash_table_lookup(p->children, name) ||
	    fstatat(p->fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return -EEXIST;
	ino = kvt_inode_new_file(p, name);
	ret = kvt_stage_new(fs, ino, 0, &ino->stage);
	if (ret < 0) {
		ino->parent = NULL; /* never attached: holds no parent ref */
		kvt_inode_ref(ino);
		kvt_inode_unref(fs, ino);
		return ret;
	}
	kvt_inode_ref(ino); /* pending */
	ino->meta.st_mode = S_IFREG | (mode & 07777);
	ino->meta.st_uid = ctx->uid;
	ino->meta.st_gid = ctx->gid;
	ino->meta.st_blksize = 4096;
	clock_gettime(CLOCK_REALTIME, &ino->meta.st_mtim);
	ino->meta.st_atim = ino->meta.st_ctim = ino->meta.st_mtim;
	kvt_inode_attach(p, ino);
	count_lookup(fs, ino);
	*out = ino;
	return 0;
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *p = kvt_inode_of(fs, parent), *ino;
	struct fuse_entry_param e;
	struct kvt_handle *h;
	int ret;

	if (!S_ISREG(mode) && (mode & S_IFMT)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	g_mutex_lock(&p->lock);
	ret = new_pending_file(fs, p, name, mode, fuse_req_ctx(req), &ino);
	if (ret < 0) {
		g_mutex_unlock(&p->lock);
		fuse_reply_err(req, -ret);
		return;
	}
	h = g_new0(struct kvt_handle, 1);
	g_mutex_lock(&ino->lock);
	h->wstage = kvt_stage_ref(ino->stage);
	open_writer(fs, ino, fi, h);
	g_mutex_unlock(&ino->lock);
	fill_entry(fs, ino, &e);
	g_mutex_unlock(&p->lock);
	fuse_reply_create(req, &e, fi);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *p = kvt_inode_of(fs, parent), *ino;
	struct fuse_entry_param e;
	int ret;

	if (!S_ISREG(mode)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	g_mutex_lock(&p->lock);
	ret = new_pending_file(fs, p, name, mode, fuse_req_ctx(req), &ino);
	g_mutex_unlock(&p->lock);
	/* Nobody will write or close it: an empty file is complete now. */
	if (ret == 0)
		ret = publish_in_place(fs, ino, NULL);
	if (ret == 0) {
		fill_entry(fs, ino, &e);
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

	clock_gettime(CLOCK_REALTIME, &now);
	g_mutex_lock(&ino->lock);
	if (now.tv_sec - ino->meta.st_atim.tv_sec < ATIME_REFRESH_SEC ||
	    !ino->has_record) {
		g_mutex_unlock(&ino->lock);
		return;
	}
	ino->meta.st_atim = now;
	g_mutex_unlock(&ino->lock);
	p = kvt_lock_parent(fs, ino);
	if (!p)
		return;
	ts[0] = now;
	ts[1].tv_nsec = UTIME_OMIT;
	ts[1].tv_sec = 0;
	utimensat(p->fd, ino->name, ts, AT_SYMLINK_NOFOLLOW);
	g_mutex_unlock(&p->lock);
}

/* Opens @h->rec's object for reading and checks it: its size, and its
 * hash unless this mount found it intact before.  A torn object is purged;
 * the answer is then ENOENT (size: the name was never really there) or EIO
 * (hash). */
static int open_object(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_handle *h,
		       struct kvt_purge_note *note)
{
	struct kvt_torn_info torn = { 0 };
	struct kvt_verify_result res;
	struct stat st;
	int ret;

	h->fd = kvt_object_open(fs->store, &h->rec, O_RDONLY);
	if (h->fd == -ENOENT) {
		torn.why = KVT_TORN_MISSING;
		kvt_purge_inode(fs, ino, &h->rec, &torn, note);
		return -ENOENT;
	}
	if (h->fd < 0)
		return h->fd;
	if (fstat(h->fd, &st))
		return -errno;
	ret = kvt_verify_fd(fs->verifier, h->fd, &st, &h->rec, fs->verify_always, &res);
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

/* The owner, group and other bits, for mounts without
 * default_permissions (then only the mounting user gets here, see main.c;
 * root passes). */
static bool may_open(struct kvt_inode *ino, const struct fuse_ctx *ctx, int flags)
{
	mode_t mode, want = 0;

	if (ctx->uid == 0)
		return true;
	if ((flags & O_ACCMODE) != O_WRONLY)
		want |= S_IROTH;
	if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
		want |= S_IWOTH;
	g_mutex_lock(&ino->lock);
	mode = ino->meta.st_mode;
	if (ctx->uid == ino->meta.st_uid)
		mode >>= 6;
	else if (ctx->gid == ino->meta.st_gid)
		mode >>= 3;
	g_mutex_unlock(&ino->lock);
	return (mode & want) == want;
}

static void op_open(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *ino = kvt_inode_of(fs, n);
	struct kvt_purge_note note = { 0 };
	struct kvt_handle *h;
	bool ref_inode = false, published;
	int ret = 0;

	if (ino->is_dir) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (!may_open(ino, fuse_req_ctx(req), fi->flags)) {
		fuse_reply_err(req, EACCES);
		return;
	}
	h = g_new0(struct kvt_handle, 1);
	h->fd = -1;
	kvt_record_init(&h->rec);
	if ((fi->flags & O_ACCMODE) == O_RDONLY) {
		ret = resolve_inode(fs, ino, &note);
		g_mutex_lock(&ino->lock);
		published = ino->has_record;
		if (published) {
			record_id(&h->rec, &ino->rec);
			h->purges = __atomic_load_n(&ino->purges, __ATOMIC_ACQUIRE);
		}
		g_mutex_unlock(&ino->lock);
		if (ret == 0 && published)
			ret = open_object(fs, ino, h, &note);
	}
	g_mutex_lock(&ino->lock);
	if (ret < 0) {
		/* torn or gone */
	} else if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		/* A new version starts with O_TRUNC or the first write; an
		 * open for writing that writes nothing (touch) changes
		 * nothing. */
		if (fi->flags & O_TRUNC)
			ret = inode_begin_write(fs, ino, true, &ref_inode, &h->wstage);
		if (ret == 0)
			open_writer(fs, ino, fi, h);
	} else if (h->fd >= 0) {
		if (ino->rewritten || ino->writers ||
		    !ino->has_record || strcmp(ino->rec.ref, h->rec.ref) ||
		    (ino->cache_readers && strcmp(ino->cache_ref, h->rec.ref))) {
			/* The kernel clamps cached and O_DIRECT reads to its
			 * idea of the size, which a writer in place (LMCache)
			 * may move under readers; readers of an older version
			 * may share the page cache too.  Such a reader is
			 * served from its own object only, whatever the
			 * kernel thinks the size is. */
			fi->direct_io = 1;
		} else {
			fi->keep_cache = !strcmp(ino->cache_ref, h->rec.ref);
			g_strlcpy(ino->cache_ref, h->rec.ref, sizeof(ino->cache_ref));
			ino->cache_readers++;
			h->cached = true;
		}
	} else if (ino->stage && ino->writers == 0) {
		/* A finished but unpublished file (a closed temp file). */
		h->rstage = kvt_stage_ref(ino->stage);
		fi->direct_io = 1;
	} else {
		/* Still being written under its own name: a reader sees
		 * nothing rather than part of it. */
		ret = -ENOENT;
	}
	g_mutex_unlock(&ino->lock);
	if (ref_inode)
		kvt_inode_ref(ino);
	kvt_purge_notify(fs, &note, true);
	if (ret < 0) {
		if (h->fd >= 0)
			close(h->fd);
		g_free(h);
		fuse_reply_err(req, -ret);
		return;
	}
	if (!h->writer) {
		fi->noflush = 1;
		if (h->fd >= 0) {
			kvt_stat_add(&fs->stats, KVT_STAT_loads, 1);
			touch_atime(fs, ino);
		}
	}
	fi->fh = (uintptr_t)h;
	fuse_reply_open(req, fi);
}

/* The stage a writer's request goes to, referenced and read-locked: the
 * handle's version (@h NULL: truncate by path, the inode's latest); once
 * that was published, a new version from the published bytes. */
static int writer_stage(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_handle *h,
			struct kvt_stage **out)
{
	for (;;) {
		struct kvt_stage *st = NULL;
		bool ref_inode = false;
		int ret = 0;

		g_mutex_lock(&ino->lock);
		if (h && h->wstage && !h->wstage->consumed)
			st = kvt_stage_ref(h->wstage);
		else
			while ((ret = inode_begin_write(fs, ino, false, &ref_inode, &st)) == -EAGAIN)
				g_cond_wait_until(&ino->published, &ino->lock,
						  g_get_monotonic_time() + G_TIME_SPAN_SECOND);
		if (ret == 0 && h && h->wstage != st) {
			if (h->wstage)
				kvt_stage_put(fs->store, h->wstage);
			h->wstage = kvt_stage_ref(st);
		}
		g_mutex_unlock(&ino->lock);
		if (ref_inode)
			kvt_inode_ref(ino);
		if (ret < 0)
			return ret;
		g_rw_lock_reader_lock(&st->io);
		if (!st->consumed) {
			*out = st;
			return 0;
		}
		g_rw_lock_reader_unlock(&st->io);
		kvt_stage_put(fs->store, st);
	}
}

static void put_stage(struct kvt_fs *fs, struct kvt_stage *st)
{
	g_rw_lock_reader_unlock(&st->io);
	kvt_stage_put(fs->store, st);
}

/* A read of a published object: EIO once the version was purged, and
 * EIO (with a purge) when the lower file holds fewer bytes than recorded;
 * a short reply would make the kernel take it as the end of the file.
 * The bytes go by splice when they can, else through @buf.  Returns the
 * bytes replied, or -errno for the caller to reply. */
static ssize_t read_object(fuse_req_t req, struct kvt_fs *fs, struct kvt_inode *ino,
			   struct kvt_handle *h, size_t size, off_t off,
			   struct kvt_purge_note *note)
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
	/* A read of several requests must fail at its first one: the kernel
	 * returns what the earlier ones got when a later one fails. */
	if (want && fstat(h->fd, &st) == 0 && (uint64_t)st.st_size < h->rec.size) {
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
			return got;
	}
	if ((uint64_t)got == want) {
		fuse_reply_buf(req, buf, got);
		return got;
	}
	torn.found_size = off + got;
	kvt_purge_inode(fs, ino, &h->rec, &torn, note);
	return -EIO;
}

static void op_read(fuse_req_t req, fuse_ino_t n, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *ino = kvt_inode_of(fs, n);
	struct kvt_handle *h = (struct kvt_handle *)(uintptr_t)fi->fh;
	struct kvt_purge_note note = { 0 };
	struct kvt_stage *st = NULL;
	g_autofree char *buf = NULL;
	ssize_t got;

	if (!h->writer && !h->rstage) {
		got = read_object(req, fs, ino, h, size, off, &note);
		if (got < 0) {
			kvt_purge_notify(fs, &note, true);
			fuse_reply_err(req, (int)-got);
		} else {
			kvt_stat_add(&fs->stats, KVT_STAT_bytes_out, got);
		}
		return;
	}
	buf = g_malloc(size ? size : 1);
	if (h->writer) {
		int ret = writer_stage(fs, ino, h, &st);

		if (ret < 0) {
			fuse_reply_err(req, -ret);
			return;
		}
		got = kvt_stage_read(st, buf, size, off);
		put_stage(fs, st);
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

static void op_write(fuse_req_t req, fuse_ino_t n, const char *buf, size_t size,
		     off_t off, struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_stage *st;
	int ret;

	ret = writer_stage(fs, kvt_inode_of(fs, n),
			   (struct kvt_handle *)(uintptr_t)fi->fh, &st);
	if (ret == 0) {
		ret = kvt_stage_write(st, buf, size, off);
		put_stage(fs, st);
	}
	if (ret < 0) {
		fuse_reply_err(req, -ret);
	} else {
		kvt_stat_add(&fs->stats, KVT_STAT_bytes_in, size);
		fuse_reply_write(req, size);
	}
}

static void op_flush(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_handle *h = (struct kvt_handle *)(uintptr_t)fi->fh;
	/* Only what this handle wrote: another writer's version is its to
	 * publish (a touch of a file being written publishes nothing). */
	int ret = h->writer && h->wstage ?
		  publish_in_place(fs, kvt_inode_of(fs, n), h->wstage) : 0;

	fuse_reply_err(req, -ret);
}

static void op_fsync(fuse_req_t req, fuse_ino_t n, int datasync,
		     struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_handle *h = (struct kvt_handle *)(uintptr_t)fi->fh;
	/* Only what this handle wrote: another writer's version is its to
	 * publish (a touch of a file being written publishes nothing). */
	int ret = h->writer && h->wstage ?
		  publish_in_place(fs, kvt_inode_of(fs, n), h->wstage) : 0;

	if (ret == 0 && fsync(fs->store->objfd))
		ret = -errno;
	fuse_reply_err(req, -ret);
}

static void op_release(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *ino = kvt_inode_of(fs, n);
	struct kvt_handle *h = (struct kvt_handle *)(uintptr_t)fi->fh;

	g_mutex_lock(&ino->lock);
	if (h->writer)
		ino->writers--;
	if (h->cached)
		ino->cache_readers--;
	g_mutex_unlock(&ino->lock);
	if (h->fd >= 0)
		close(h->fd);
	if (h->rstage)
		kvt_stage_put(fs->store, h->rstage);
	if (h->wstage)
		kvt_stage_put(fs->store, h->wstage);
	g_free(h);
	fuse_reply_err(req, 0);
}

static int set_size(struct kvt_fs *fs, struct kvt_inode *ino, off_t size,
		    struct kvt_handle *h)
{
	struct kvt_stage *st = NULL;
	bool publish, ref_inode = false;
	int ret;

	if (size == 0) {
		/* O_TRUNC (see op_init): a version of its own, from
		 * nothing. */
		g_mutex_lock(&ino->lock);
		ret = inode_begin_write(fs, ino, true, &ref_inode, &st);
		if (ret == 0 && h) {
			if (h->wstage)
				kvt_stage_put(fs->store, h->wstage);
			h->wstage = g_steal_pointer(&st);
		}
		g_mutex_unlock(&ino->lock);
		if (st)
			kvt_stage_put(fs->store, st);
		if (ref_inode)
			kvt_inode_ref(ino);
		if (ret < 0)
			return ret;
	} else {
		ret = writer_stage(fs, ino, h, &st);
		if (ret < 0)
			return ret;
		ret = kvt_stage_truncate(st, size);
		put_stage(fs, st);
		if (ret < 0)
			return ret;
	}
	g_mutex_lock(&ino->lock);
	publish = !h && ino->writers == 0;
	g_mutex_unlock(&ino->lock);
	/* truncate(2) by path is a whole new version at once. */
	return publish ? publish_in_place(fs, ino, NULL) : 0;
}

static void op_setattr(fuse_req_t req, fuse_ino_t n, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *ino = kvt_inode_of(fs, n);
	struct kvt_inode *p = NULL;
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT } }, now;
	int ret = 0, dirfd;
	const char *name;
	struct stat st;

	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (ino->is_dir) {
			fuse_reply_err(req, EISDIR);
			return;
		}
		struct kvt_handle *h = fi ? (struct kvt_handle *)(uintptr_t)fi->fh : NULL;

		/* open(O_RDONLY | O_TRUNC) truncates through a reader's
		 * handle: that is a truncate by path. */
		ret = set_size(fs, ino, attr->st_size, h && h->writer ? h : NULL);
		if (ret < 0)
			goto out;
	}
	/* "Now" is read here, not left to the lower file system, whose
	 * clock is the coarse one: a time set now must not come out older
	 * than the caller's own clock just before the call. */
	clock_gettime(CLOCK_REALTIME, &now);
	if (to_set & FUSE_SET_ATTR_ATIME)
		ts[0] = to_set & FUSE_SET_ATTR_ATIME_NOW ? now : attr->st_atim;
	if (to_set & FUSE_SET_ATTR_MTIME)
		ts[1] = to_set & FUSE_SET_ATTR_MTIME_NOW ? now : attr->st_mtim;

	/* Metadata lives on the lower entry (record or directory): each
	 * change is one lower call.  Pending files keep it in memory until
	 * their record is written. */
	if (ino->is_dir) {
		dirfd = ino->fd;
		name = "";
	} else {
		p = kvt_lock_parent(fs, ino);
		dirfd = p ? p->fd : -1;
		name = p ? ino->name : NULL;
	}
	if (!ino->is_dir) {
		bool on_disk;

		g_mutex_lock(&ino->lock);
		on_disk = ino->has_record && p;
		if (to_set & FUSE_SET_ATTR_MODE)
			ino->meta.st_mode = (ino->meta.st_mode & S_IFMT) | (attr->st_mode & 07777);
		if (to_set & FUSE_SET_ATTR_UID)
			ino->meta.st_uid = attr->st_uid;
		if (to_set & FUSE_SET_ATTR_GID)
			ino->meta.st_gid = attr->st_gid;
		g_mutex_unlock(&ino->lock);
		if (!on_disk) {
			if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
				g_mutex_lock(&ino->lock);
				if (to_set & FUSE_SET_ATTR_ATIME)
					ino->meta.st_atim = ts[0];
				if (to_set & FUSE_SET_ATTR_MTIME)
					ino->meta.st_mtim = ts[1];
				g_mutex_unlock(&ino->lock);
			}
			goto unlock;
		}
	}
	if ((to_set & FUSE_SET_ATTR_MODE) &&
	    fchmodat(dirfd, name, attr->st_mode & 07777, 0) && errno != ENOENT)
		ret = -errno;
	if (!ret && (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) &&
	    fchownat(dirfd, name, to_set & FUSE_SET_ATTR_UID ? attr->st_uid : (uid_t)-1,
		     to_set & FUSE_SET_ATTR_GID ? attr->st_gid : (gid_t)-1,
		     AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW))
		ret = -errno;
	if (!ret && (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		if (ino->is_dir ? futimens(dirfd, ts) : utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW))
			ret = -errno;
	}
	if (!ret && !ino->is_dir && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		g_mutex_lock(&ino->lock);
		ino->meta.st_atim = st.st_atim;
		ino->meta.st_mtim = st.st_mtim;
		ino->meta.st_ctim = st.st_ctim;
		ino->rec_ctime = st.st_ctim;
		g_mutex_unlock(&ino->lock);
	}
unlock:
	if (p)
		g_mutex_unlock(&p->lock);
out:
	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	ret = inode_attr(ino, &st);
	if (ret < 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, fs->attr_timeout);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *p = kvt_inode_of(fs, parent);
	struct kvt_purge_note note = { 0 };
	struct fuse_entry_param e;
	int ret;

	g_mutex_lock(&p->lock);
	ret = g_hash_table_lookup(p->children, name) ? -EEXIST : 0;
	if (ret == 0 && mkdirat(p->fd, name, mode & 07777))
		ret = -errno;
	g_mutex_unlock(&p->lock);
	if (ret == 0)
		ret = do_lookup(fs, p, name, &e, &note);
	if (ret < 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_entry(req, &e);
	kvt_purge_notify(fs, &note, false);
}

static bool has_local_files(struct kvt_inode *dir)
{
	GHashTableIter it;
	gpointer k, v;
	bool any = false;

	g_mutex_lock(&dir->lock);
	g_hash_table_iter_init(&it, dir->children);
	while (!any && g_hash_table_iter_next(&it, &k, &v)) {
		struct kvt_inode *c = v;

		if (!c->is_dir) {
			g_mutex_lock(&c->lock);
			any = !c->has_record && c->stage;
			g_mutex_unlock(&c->lock);
		}
	}
	g_mutex_unlock(&dir->lock);
	return any;
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *p = kvt_inode_of(fs, parent), *child;
	int ret = 0;

	g_mutex_lock(&p->lock);
	child = g_hash_table_lookup(p->children, name);
	if (child && child->is_dir && has_local_files(child))
		ret = -ENOTEMPTY;
	else if (unlinkat(p->fd, name, AT_REMOVEDIR))
		ret = -errno;
	else if (child)
		kvt_inode_detach(child);
	g_mutex_unlock(&p->lock);
	fuse_reply_err(req, -ret);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *p = kvt_inode_of(fs, parent), *child;
	bool local = false, drop = false;
	struct stat st;
	int ret = 0;

	g_mutex_lock(&p->lock);
	child = g_hash_table_lookup(p->children, name);
	if (child) {
		g_mutex_lock(&child->lock);
		local = !child->has_record && child->stage;
		g_mutex_unlock(&child->lock);
	}
	if (fstatat(p->fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISDIR(st.st_mode))
			ret = -EISDIR;
		else
			ret = kvt_record_remove(fs->store, p->fd, name);
		if (ret == 0)
			kvt_stat_add(&fs->stats, KVT_STAT_evictions, 1);
	} else if (!local) {
		ret = -errno;
	}
	if (ret == 0 && child) {
		kvt_inode_detach(child);
		drop = inode_drop_stage(fs, child);
	}
	g_mutex_unlock(&p->lock);
	if (drop)
		kvt_inode_unref(fs, child);
	fuse_reply_err(req, -ret);
}

static void lock_two(struct kvt_inode *a, struct kvt_inode *b)
{
	if (a == b) {
		g_mutex_lock(&a->lock);
	} else if (a < b) {
		g_mutex_lock(&a->lock);
		g_mutex_lock(&b->lock);
	} else {
		g_mutex_lock(&b->lock);
		g_mutex_lock(&a->lock);
	}
}

static void unlock_two(struct kvt_inode *a, struct kvt_inode *b)
{
	g_mutex_unlock(&a->lock);
	if (a != b)
		g_mutex_unlock(&b->lock);
}

/* Moves @ino to @np/@name in the tables (caller holds the tree lock and
 * both directories' locks). */
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
	g_mutex_lock(&fs->lru_lock);
	if (ino->lru) {
		g_free(ino->lru->name);
		ino->lru->name = g_strdup(name);
		ino->lru->parent = kvt_nodeid_of(fs, np);
	}
	g_mutex_unlock(&fs->lru_lock);
	/* The old parent's reference is dropped by the caller, unlocked. */
}

/* Removes whatever a rename swapped into @dirfd/@name. */
static void remove_swapped(struct kvt_fs *fs, int dirfd, const char *name)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return;
	if (S_ISDIR(st.st_mode))
		unlinkat(dirfd, name, AT_REMOVEDIR);
	else
		kvt_record_remove(fs->store, dirfd, name);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *p = kvt_inode_of(fs, parent), *np = kvt_inode_of(fs, newparent);
	struct kvt_inode *src, *dst, *unref_parent = NULL, *unref_dst = NULL;
	struct kvt_record rec, old;
	struct kvt_stage *pub = NULL;
	struct stat sst, dst_st;
	bool src_lower, dst_lower, dst_local = false, publish = false, drop = false;
	int ret = 0;

	kvt_record_init(&rec);
	kvt_record_init(&old);
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (strlen(newname) > NAME_MAX) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	g_mutex_lock(&p->lock);
	src = g_hash_table_lookup(p->children, name);
	if (src)
		kvt_inode_ref(src);
	g_mutex_unlock(&p->lock);

	/* Renaming a finished temp file to its final name is the moment of
	 * publication: the object is made first, the name follows in one
	 * rename of the record below. */
	if (src && !src->is_dir && !(flags & RENAME_EXCHANGE) &&
	    !kvt_is_tmp_name(fs, newname)) {
		ret = publish_object(fs, src, NULL, &rec, &pub);
		if (ret < 0)
			goto reply;
		publish = ret == 0;
		ret = 0;
	}

	g_mutex_lock(&fs->tree_lock);
	lock_two(p, np);
	src_lower = fstatat(p->fd, name, &sst, AT_SYMLINK_NOFOLLOW) == 0;
	dst_lower = fstatat(np->fd, newname, &dst_st, AT_SYMLINK_NOFOLLOW) == 0;
	dst = g_hash_table_lookup(np->children, newname);
	if (dst && !dst->is_dir) {
		g_mutex_lock(&dst->lock);
		dst_local = !dst->has_record && dst->stage;
		g_mutex_unlock(&dst->lock);
	}
	if (!src_lower && !publish && !(src && src->stage)) {
		ret = -ENOENT;
	} else if ((flags & RENAME_NOREPLACE) && (dst_lower || dst_local)) {
		ret = -EEXIST;
	} else if (flags & RENAME_EXCHANGE) {
		if (!src_lower || !dst_lower)
			ret = -EINVAL; /* unpublished files have no lower entry */
		else if (renameat2(p->fd, name, np->fd, newname, RENAME_EXCHANGE))
			ret = -errno;
	} else if (publish) {
		struct kvt_meta meta;

		g_mutex_lock(&src->lock);
		meta = kvt_inode_meta(src, false);
		g_mutex_unlock(&src->lock);
		ret = kvt_record_install(fs->store, np->fd, newname, &rec, &meta, &old);
		if (ret == 0 && src_lower)
			kvt_record_remove(fs->store, p->fd, name);
	} else if (src_lower) {
		if (!dst_lower) {
			if (renameat2(p->fd, name, np->fd, newname, RENAME_NOREPLACE) &&
			    (errno != EINVAL || renameat(p->fd, name, np->fd, newname)))
				ret = -errno;
		} else if (renameat2(p->fd, name, np->fd, newname, RENAME_EXCHANGE) == 0) {
			/* Swapped: what was at the destination now sits at
			 * the source name and goes, with its object. */
			remove_swapped(fs, p->fd, name);
		} else if (errno == EINVAL) {
			if (!S_ISDIR(dst_st.st_mode) &&
			    kvt_record_read(fs->store, np->fd, newname, &old, &dst_st) < 0)
				kvt_record_clear(&old);
			if (renameat(p->fd, name, np->fd, newname))
				ret = -errno;
		} else {
			ret = -errno;
		}
	} else if (dst_lower) {
		/* An unpublished file renamed over a published name (a
		 * temp name): the old record goes. */
		if (S_ISDIR(dst_st.st_mode))
			ret = -EISDIR;
		else
			ret = kvt_record_remove(fs->store, np->fd, newname);
	}

	if (ret == 0) {
		if (flags & RENAME_EXCHANGE) {
			if (dst && src) {
				char *sname = src->name;
				struct kvt_inode *sp = src->parent;

				src->name = dst->name;
				src->parent = dst->parent;
				dst->name = sname;
				dst->parent = sp;
				g_hash_table_replace(src->parent->children, src->name, src);
				g_hash_table_replace(dst->parent->children, dst->name, dst);
			} else {
				if (src)
					kvt_inode_detach(src);
				if (dst)
					kvt_inode_detach(dst);
			}
		} else {
			if (dst && dst != src) {
				kvt_inode_detach(dst);
				unref_dst = dst;
				g_mutex_lock(&dst->lock);
				/* A process that resolved the old name before the
				 * rename may still open it: its object goes when
				 * the kernel forgets the inode, not now. */
				if (dst->has_record && old.ref[0] &&
				    !strcmp(dst->rec.ref, old.ref)) {
					dst->release_on_free = true;
					kvt_record_clear(&old);
				}
				g_mutex_unlock(&dst->lock);
			}
			if (src) {
				unref_parent = src->parent;
				move_child(fs, src, np, newname);
			}
		}
	}
	if (ret == 0 && publish)
		drop = inode_published(fs, src, &rec, np->fd, newname, false);
	unlock_two(p, np);
	g_mutex_unlock(&fs->tree_lock);
	if (drop)
		kvt_inode_unref(fs, src);

	if (ret == 0)
		release_replaced(fs, &old, publish ? &rec : NULL);
	if (publish)
		publish_done(fs, src, pub, &rec, ret == 0);
	if (unref_dst && inode_drop_stage(fs, unref_dst))
		kvt_inode_unref(fs, unref_dst);
	if (unref_parent)
		kvt_inode_unref(fs, unref_parent);
reply:
	kvt_record_clear(&rec);
	kvt_record_clear(&old);
	if (src)
		kvt_inode_unref(fs, src);
	fuse_reply_err(req, -ret);
}

static void dir_add(GArray *a, const char *name, unsigned char type)
{
	struct dir_entry d = { g_strdup(name), type };

	g_array_append_val(a, d);
}

static void clear_dir_entry(gpointer p)
{
	g_free(((struct dir_entry *)p)->name);
}

static void op_opendir(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *dir = kvt_inode_of(fs, n);
	struct dir_handle *dh;
	g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	GHashTableIter it;
	gpointer k, v;
	struct dirent *de;
	DIR *d;
	int fd;

	if (!dir->is_dir) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	/* The listing is taken once, so offsets stay stable while the
	 * directory changes. */
	dh = g_new0(struct dir_handle, 1);
	dh->entries = g_array_new(FALSE, FALSE, sizeof(struct dir_entry));
	g_array_set_clear_func(dh->entries, clear_dir_entry);
	g_mutex_lock(&dir->lock);
	fd = openat(dir->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		int err = errno;

		if (fd >= 0)
			close(fd);
		g_mutex_unlock(&dir->lock);
		g_array_unref(dh->entries);
		g_free(dh);
		fuse_reply_err(req, err);
		return;
	}
	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR && de->d_type != DT_REG && de->d_type != DT_UNKNOWN)
			continue;
		dir_add(dh->entries, de->d_name, de->d_type);
		g_hash_table_add(seen, g_strdup(de->d_name));
	}
	closedir(d);
	/* Files being written here exist only in memory so far. */
	g_hash_table_iter_init(&it, dir->children);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		struct kvt_inode *c = v;

		if (!c->is_dir && !g_hash_table_contains(seen, k)) {
			bool local;

			g_mutex_lock(&c->lock);
			local = !c->has_record && c->stage;
			g_mutex_unlock(&c->lock);
			if (local)
				dir_add(dh->entries, k, DT_REG);
		}
	}
	g_mutex_unlock(&dir->lock);
	fi->fh = (uintptr_t)dh;
	fuse_reply_open(req, fi);
}

static void do_readdir(fuse_req_t req, fuse_ino_t n, size_t size, off_t off,
		       struct fuse_file_info *fi, bool plus)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct dir_handle *dh = (struct dir_handle *)(uintptr_t)fi->fh;
	g_autoptr(GArray) notes = g_array_new(FALSE, TRUE, sizeof(struct kvt_purge_note));
	char *buf = g_malloc(size);
	size_t used = 0;

	for (guint i = off; i < dh->entries->len; i++) {
		struct dir_entry *d = &g_array_index(dh->entries, struct dir_entry, i);
		bool dot = !strcmp(d->name, ".") || !strcmp(d->name, "..");
		struct kvt_purge_note note = { 0 };
		size_t len;

		if (plus) {
			struct fuse_entry_param e = { 0 };

			if (dot) {
				e.attr.st_mode = d->type << 12;
			} else if (do_lookup(fs, kvt_inode_of(fs, n), d->name, &e, &note) < 0) {
				/* Vanished since opendir, or torn; the kernel
				 * learns of a purge once this reply is out. */
				if (note.parent || note.child)
					g_array_append_val(notes, note);
				continue;
			}
			len = fuse_add_direntry_plus(req, buf + used, size - used,
						     d->name, &e, i + 1);
			if (len > size - used) {
				if (!dot)
					forget_one(fs, kvt_inode_of(fs, e.ino), 1);
				break;
			}
		} else {
			struct stat st = { .st_mode = d->type << 12 };

			len = fuse_add_direntry(req, buf + used, size - used, d->name,
						&st, i + 1);
			if (len > size - used)
				break;
		}
		used += len;
	}
	fuse_reply_buf(req, buf, used);
	g_free(buf);
	for (guint i = 0; i < notes->len; i++)
		kvt_purge_notify(fs, &g_array_index(notes, struct kvt_purge_note, i), false);
}

static void op_readdir(fuse_req_t req, fuse_ino_t n, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, n, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t n, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	do_readdir(req, n, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	struct dir_handle *dh = (struct dir_handle *)(uintptr_t)fi->fh;

	g_array_unref(dh->entries);
	g_free(dh);
	fuse_reply_err(req, 0);
}

const struct fuse_lowlevel_ops kvt_fuse_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.rename = op_rename,
	.open = op_open,
	.create = op_create,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.fsync = op_fsync,
	.release = op_release,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.statfs = op_statfs,
	.setxattr = kvt_op_setxattr,
	.getxattr = kvt_op_getxattr,
	.listxattr = kvt_op_listxattr,
	.removexattr = kvt_op_removexattr,
};
