/* One mount: what every FUSE operation shares.  The callback files, by
 * the operations they answer, find the inode, call the store and reply;
 * they call down, never each other:
 *
 *   lookup.c     lookup, forget, getattr, statfs
 *   attr.c       setattr
 *   file.c       open, read, write, flush, fsync(dir), release, create, mknod
 *   namespace.c  mkdir, rmdir, unlink, rename, symlink, readlink, link
 *   listing.c    opendir, readdir(plus), releasedir
 *   xattr.c      extended attributes and the verdicts
 *   ops.c        the operation table, init and destroy
 *
 * What two of them share is below them:
 *
 *   version.c    versions of a file being written, and their publication
 *   special.c    symbolic links and special files made
 *   handle.c     open files' handles
 *   resolve.c    names resolved, sizes checked, attributes
 *   purge.c      torn names removed;  share.c: the sharing watch
 *   inode.c      inodes, the kernel's lookup counts and the bound on them
 *   notify.c     what the kernel must forget, told it
 *
 * and below the daemon, the store (store.h). */
#pragma once
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <glib.h>
#include <stdbool.h>
#include <sys/statvfs.h>

#include "bounds.h"
#include "dircache.h"
#include "stats.h"
#include "store.h"
#include "verify.h"

/* How many purges user.kvtierfs.purges keeps, the latest. */
#define KVT_RECENT_PURGES 16
/* Threads between an ESTALE of kvt_version_room and its retry at once. */
#define KVT_TOLD_STALE 64

/* 1 MiB less four pages (see main.c). */
#define KVT_MAX_READ 1032192

struct kvt_inode;
struct kvt_notifier;

struct kvt_fs {
	struct kvt_store *store;
	struct kvt_inode *root;
	GMutex tree_lock;            /* lockorder.h */
	struct kvt_dircache *dirs;   /* lower directories held open */
	struct fuse_session *se;
	struct kvt_stats stats;
	struct kvt_verifier *verifier;
	struct kvt_copies *copies;   /* verified copies (verify=always), or NULL */
	struct kvt_notifier *notifier;

	/* Options. */
	char *tmp_suffix;            /* names with it are published only by rename */
	double entry_timeout, attr_timeout; /* < 0: by sharing (share.h) */
	bool shared;                 /* atomic: another mount uses the store */
	double negative_timeout;     /* kernel caching of "no such name" */
	bool verify_always;          /* hash on every open, not once per mount */
	const char *remote_kind;     /* verify=auto found the store remote */
	bool sync;                   /* -o sync: publications durable (publish.c) */

	/* The files and directories the kernel knows, the least recently
	 * looked up first (inode.c).  The kernel keeps what it looked up
	 * until memory runs short, and each costs an inode here; past
	 * max_inodes names are dropped from its dentry cache (it then
	 * forgets them, a directory with its subtree), files before
	 * directories, so the daemon's memory stays bounded, whatever the
	 * number of directories (vLLM makes one per block or two). */
	GMutex lru_lock;
	GQueue lru_files, lru_dirs;
	guint max_inodes;

	/* statfs answers from the last figures while the lower disk does
	 * not answer (lookup.c): one statvfs at a time goes down. */
	GMutex statfs_lock;
	GCond statfs_done;
	bool statfs_busy;
	struct statvfs statfs_last;

	/* What user.kvtierfs.mount and user.kvtierfs.purges on the root
	 * tell kvtierfs-stat (xattr.c, purge.c). */
	char *lower_path;
	gint64 started;              /* g_get_real_time() at the mount */
	GMutex recent_lock;
	char *recent[KVT_RECENT_PURGES]; /* "unix-seconds message", a ring */
	guint recent_next;

	/* The threads lately told ESTALE to make room for a writer, whose
	 * open the kernel is retrying (version.c): a ring. */
	GMutex told_lock;
	struct {
		pid_t tid;
		gint64 at;           /* g_get_monotonic_time() */
	} told[KVT_TOLD_STALE];
	guint told_next;

	/* Files being written per uid, client xattrs (bounds.h). */
	struct kvt_bounds bounds;

	/* Everything alive, for destroy: inodes and open handles. */
	GMutex live_lock;
	GQueue live_inodes;
	GQueue live_handles;
};

/* An open handle, kept on fs->live_handles so that destroy can free the
 * handles the kernel never released (a mount that was killed off). */
struct kvt_live {
	GList link;
	void (*free)(struct kvt_fs *fs, struct kvt_live *l);
};

static inline void kvt_live_add(struct kvt_fs *fs, struct kvt_live *l,
				void (*free_fn)(struct kvt_fs *, struct kvt_live *))
{
	l->link.data = l;
	l->free = free_fn;
	g_mutex_lock(&fs->live_lock);
	g_queue_push_tail_link(&fs->live_handles, &l->link);
	g_mutex_unlock(&fs->live_lock);
}

static inline void kvt_live_remove(struct kvt_fs *fs, struct kvt_live *l)
{
	g_mutex_lock(&fs->live_lock);
	g_queue_unlink(&fs->live_handles, &l->link);
	g_mutex_unlock(&fs->live_lock);
}

static inline struct kvt_fs *kvt_fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static inline bool kvt_is_tmp_name(struct kvt_fs *fs, const char *name)
{
	return fs->tmp_suffix[0] && g_str_has_suffix(name, fs->tmp_suffix);
}

extern const struct fuse_lowlevel_ops kvt_fuse_ops;

/* Frees every inode and handle the kernel left (ops.c); again is a no-op. */
void kvt_fs_free_all(struct kvt_fs *fs);
