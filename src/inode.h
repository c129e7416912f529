/* In-memory inodes: what the kernel has looked up, plus files being
 * written (pending).  Everything here is a cache of the lower store except
 * pending files, which belong to this mount alone and die with it.
 *
 * Locking, outermost first:
 *   fs->tree_lock   guards every inode's parent/name (changed by rename and
 *                   unlink) and is taken to find a file's current parent;
 *   dir->lock       guards a directory's children table and the lower
 *                   entries under it; two are taken in address order;
 *   file->lock      guards a file's record, stage and open counts.
 * A lock is never taken while one further down the list is held. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "record.h"
#include "stage.h"
#include "stats.h"
#include "store.h"
#include "verify.h"

/* A file the kernel knows, in the order it learnt of them (see
 * kvt_fs.lru). */
struct kvt_lru_entry {
	GList link;
	struct kvt_inode *ino;
	uint64_t parent;      /* nodeid of the directory */
	char *name;
};

struct kvt_inode {
	gint refs;            /* kernel lookups (one), pending stage (one),
			       * children (one each); 0 frees */
	uint64_t nlookup;     /* under the parent's lock */
	uint64_t serial;      /* st_ino */
	bool is_dir;
	bool unlinked;
	struct kvt_inode *parent;
	char *name;
	GMutex lock;

	/* directory */
	int fd;               /* lower directory under names/ */
	dev_t dev;
	ino_t lower_ino;
	GHashTable *children; /* name -> struct kvt_inode * */

	/* file */
	bool has_record;      /* a published version exists */
	struct kvt_record rec; /* published object; rec.xattrs: client xattrs */
	struct stat meta;     /* mode, owner, times; st_size of published */
	ino_t rec_ino;        /* lower record identity, to see replacement */
	struct timespec rec_ctime;
	blkcnt_t blocks;
	struct kvt_stage *stage; /* pending version, or NULL */
	GCond published;      /* with lock: a publication of stage ended */
	int writers;          /* open handles that may write */
	bool rewritten;       /* a version was written in place at some time */
	bool release_on_free; /* replaced: the object goes with the inode */
	int cache_readers;    /* open readers using the page cache */
	struct kvt_lru_entry *lru; /* under fs->lru_lock */
	guint purges;         /* atomic: bumped when a version is purged, so
			       * that handles opened before get EIO */
	char cache_ref[KVT_REF_MAX]; /* object whose bytes the page cache holds */
};

struct kvt_fs {
	struct kvt_store *store;
	struct kvt_inode *root;
	GMutex tree_lock;
	char *tmp_suffix;     /* names with it are published only by rename */
	double entry_timeout, attr_timeout;
	double negative_timeout; /* kernel caching of "no such name" */
	struct fuse_session *se;
	struct kvt_stats stats;
	struct kvt_verifier *verifier;
	bool verify_always;   /* hash on every open, not once per mount */
	GThreadPool *notifier; /* kernel cache invalidations, off the
				* request threads */
	/* The files the kernel knows, oldest first.  The kernel keeps what it
	 * looked up until memory runs short, and each costs an inode here;
	 * past max_inodes the oldest names are dropped from its dentry cache
	 * (it then forgets them), so the daemon's memory stays bounded. */
	GMutex lru_lock;
	GQueue lru;
	guint max_inodes;
};

struct kvt_inode *kvt_inode_new_dir(struct kvt_inode *parent, const char *name,
				    int fd, const struct stat *st);
struct kvt_inode *kvt_inode_new_file(struct kvt_inode *parent, const char *name);
/* Adds @child to @parent's table; caller holds parent->lock. */
void kvt_inode_attach(struct kvt_inode *parent, struct kvt_inode *child);
/* Removes @child from its parent's table (if it is there) and marks it
 * unlinked; caller holds parent->lock. */
void kvt_inode_detach(struct kvt_inode *child);
/* Drops one reference; frees the inode (and drops its parent's) at zero. */
void kvt_inode_unref(struct kvt_fs *fs, struct kvt_inode *ino);
void kvt_inode_ref(struct kvt_inode *ino);

/* Locks and returns @ino's current parent, or NULL if it was unlinked. */
struct kvt_inode *kvt_lock_parent(struct kvt_fs *fs, struct kvt_inode *ino);

/* Metadata for @ino's record file (caller holds ino->lock). */
struct kvt_meta kvt_inode_meta(const struct kvt_inode *ino, bool set_times);

bool kvt_is_tmp_name(struct kvt_fs *fs, const char *name);
bool kvt_inode_pending(const struct kvt_inode *ino);

/* Creates a stage, copying the published object's first @keep bytes
 * (copy-on-write of a published file opened for writing). */
int kvt_stage_new(struct kvt_fs *fs, struct kvt_inode *ino, uint64_t keep,
		  struct kvt_stage **out);
