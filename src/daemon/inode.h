/* In-memory inodes: what the kernel has looked up, plus files being
 * written.  Everything here is a cache of the lower store except files
 * written here and not yet published, which belong to this mount alone
 * and die with it.  Locks: lockorder.h. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "fs.h"
#include "lockorder.h"
#include "record.h"
#include "stage.h"

struct kvt_lru_entry;

enum { KVT_CLIENT_ATIME = 1, KVT_CLIENT_MTIME = 2 };

struct kvt_inode {
	gint refs;            /* kernel lookups (one), pending stage (one),
			       * children (one each); 0 frees */
	uint64_t nlookup;     /* under the parent's lock */
	uint64_t serial;      /* unique in this mount: the key of its lower
			       * directory in fs->dirs */
	uint64_t st_ino;      /* what stat and readdir say (see inode.c) */
	bool is_dir;
	bool unlinked;
	struct kvt_inode *parent;
	char *name;
	GMutex lock;
	uint64_t gen;         /* under lock: bumped by every unlock but a
			       * lookup's look (kvt_inode_unlock_quiet), so
			       * that a lookup that looked at the lower disk
			       * without the lock sees whether anything
			       * changed meanwhile (resolve.c) */
	GList live;           /* in fs->live_inodes */

	/* directory */
	dev_t dev;            /* its lower directory's identity */
	ino_t lower_ino;
	GHashTable *children; /* name -> struct kvt_inode * */

	/* file */
	bool has_record;      /* a published version exists */
	struct kvt_record rec; /* published object; rec.xattrs: client xattrs */
	uint64_t xattr_held;  /* bytes of rec.xattrs charged to xattr_uid's
			       * memory for files without a record (bounds.h) */
	uid_t xattr_uid;
	struct stat meta;     /* mode, owner, times; st_size of published */
	ino_t rec_ino;        /* lower record identity, to see replacement */
	struct timespec rec_ctime;
	blkcnt_t blocks;
	struct kvt_stage *stage; /* latest version being written, or NULL */
	GCond published;      /* with lock: a publication of stage ended */
	int writers;          /* open handles that may write */
	GSList *fresh_writers; /* writer handles with no version yet (file.c) */
	unsigned times_set;   /* KVT_CLIENT_ATIME | KVT_CLIENT_MTIME: set by the
			       * client on the version being written since
			       * its last write: its record keeps them */
	bool rewritten;       /* a version was written in place at some time,
			       * or is about to be: readers go by the daemon,
			       * not the kernel's size (file.c) */
	bool renew;           /* a writer was sent away from this inode (it
			       * has readers of the page cache): the next
			       * lookup of its name makes a new one (version.c) */
	bool release_on_free; /* replaced: the object goes with the inode */
	int cache_readers;    /* open readers using the page cache */
	struct kvt_lru_entry *lru; /* under fs->lru_lock */
	guint purges;         /* atomic: bumped when a version is purged, so
			       * that handles opened before get EIO */
	char cache_ref[KVT_REF_MAX]; /* object whose bytes the page cache holds */
	bool cache_settled;   /* atomic: a reader of cache_ref has read, so
			       * the kernel dropped the older version's pages */
};

static inline struct kvt_inode *kvt_inode_of(struct kvt_fs *fs, fuse_ino_t n)
{
	return n == FUSE_ROOT_ID ? fs->root : (struct kvt_inode *)(uintptr_t)n;
}

static inline fuse_ino_t kvt_nodeid_of(struct kvt_fs *fs, struct kvt_inode *ino)
{
	return ino == fs->root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)ino;
}

/* Checked builds keep freed inodes a while (inode.c); AddressSanitizer
 * keeps them better: every field, not only locks and references. */
#if defined(KVT_LOCK_CHECKS) && !defined(__SANITIZE_ADDRESS__)
#define KVT_INODE_QUARANTINE 1
#endif

#ifdef KVT_INODE_QUARANTINE
/* The refs of a freed inode in the quarantine. */
#define KVT_INODE_FREED (-0x5a5a5a5a)
/* Aborts, naming @what, if @ino was freed. */
void kvt_inode_check_live(const struct kvt_inode *ino, const char *what);
#else
static inline void kvt_inode_check_live(const struct kvt_inode *ino, const char *what)
{
	(void)ino;
	(void)what;
}
#endif

static inline void kvt_inode_lock(struct kvt_inode *ino)
{
	kvt_inode_check_live(ino, "lock");
	kvt_mutex_lock(&ino->lock, ino->is_dir ? KVT_RANK_DIR : KVT_RANK_FILE);
}

static inline void kvt_inode_unlock(struct kvt_inode *ino)
{
	ino->gen++;
	kvt_mutex_unlock(&ino->lock);
}

/* For a section that changed nothing anyone looking at the lower disk
 * unlocked must know of: a look, or a new name in a directory's table
 * (a lookup of that name sees its inode appear). */
static inline void kvt_inode_unlock_quiet(struct kvt_inode *ino)
{
	kvt_mutex_unlock(&ino->lock);
}

static inline void kvt_tree_lock(struct kvt_fs *fs)
{
	kvt_mutex_lock(&fs->tree_lock, KVT_RANK_TREE);
}

static inline void kvt_tree_unlock(struct kvt_fs *fs)
{
	kvt_mutex_unlock(&fs->tree_lock);
}

/* A file created in this mount and never published: it exists in memory
 * only (caller holds ino->lock). */
static inline bool kvt_inode_local(const struct kvt_inode *ino)
{
	return !ino->is_dir && !ino->has_record && ino->stage;
}

/* A version of the file is being written and not yet published (caller
 * holds ino->lock). */
static inline bool kvt_inode_pending(const struct kvt_inode *ino)
{
	return ino->stage && kvt_stage_state(ino->stage) == KVT_STAGE_OPEN;
}

/* kvt_inode_local, taking the file's lock. */
bool kvt_inode_is_local(struct kvt_inode *ino);

struct kvt_inode *kvt_inode_new_root(struct kvt_fs *fs, struct kvt_dir *names);
/* A directory whose lower directory @st describes, or a file. */
struct kvt_inode *kvt_inode_new_dir(struct kvt_fs *fs, struct kvt_inode *parent,
				    const char *name, const struct stat *st);
struct kvt_inode *kvt_inode_new_file(struct kvt_fs *fs, struct kvt_inode *parent,
				     const char *name);
/* Frees an inode that was never attached nor seen by anyone. */
void kvt_inode_discard(struct kvt_fs *fs, struct kvt_inode *ino);
/* Adds @child to @parent's table; caller holds parent->lock. */
void kvt_inode_attach(struct kvt_inode *parent, struct kvt_inode *child);
/* Removes @child from its parent's table (if it is there) and marks it
 * unlinked; caller holds the parent's lock. */
void kvt_inode_detach(struct kvt_inode *child);
void kvt_inode_ref(struct kvt_inode *ino);
/* Drops one reference; frees the inode (and drops its parent's) at zero.
 * No inode lock may be held (lockorder.h). */
void kvt_inode_unref(struct kvt_fs *fs, struct kvt_inode *ino);
/* Frees every inode left (the kernel is gone); single-threaded. */
void kvt_inodes_free_all(struct kvt_fs *fs);

/* The lower directory of @dir, referenced: from the cache, or opened
 * from its parent's, one component without following links, and checked
 * to be the directory the inode knows.  No inode lock may be held. */
int kvt_inode_dir(struct kvt_fs *fs, struct kvt_inode *dir, struct kvt_dir **out);
/* @dir's lower directory showed @st: its mode and owner are kept past
 * its stay in fs->dirs, so that kvt_inode_dir_remake makes it again as it
 * was.  No inode lock may be held. */
void kvt_inode_dir_seen(struct kvt_inode *dir, const struct stat *st);
/* kvt_inode_dir for a step that makes a name in @dir (create, mknod,
 * mkdir): if @dir's lower directory cannot be opened, another mount
 * removed it, and it is made again (kvt_inode_dir_remake). */
int kvt_inode_dir_to_make(struct kvt_fs *fs, struct kvt_inode *dir, struct kvt_dir **out);
/* Whether the lower directory @d is gone: removed (by another mount:
 * this one removes a directory only with its inode). */
bool kvt_dir_gone(struct kvt_dir *d);
/* @dir's lower directory is gone (kvt_dir_gone): another mount removed
 * it, and maybe made one again by its name.  The directory at its path
 * now, made again if none is there (and its parents too), becomes
 * @dir's; *@out gets it, referenced.  For a step that failed with ENOENT
 * or ESTALE in @dir, and is then made again.  No inode lock may be
 * held. */
int kvt_inode_dir_remake(struct kvt_fs *fs, struct kvt_inode *dir, struct kvt_dir **out);
/* Locks and returns @ino's current parent, with its lower directory in
 * *@d (referenced); NULL (and *@d NULL) when @ino was unlinked, or its
 * directory cannot be opened (*@err says why, else 0). */
struct kvt_inode *kvt_lock_parent(struct kvt_fs *fs, struct kvt_inode *ino,
				  struct kvt_dir **d, int *err);

/* The kernel's references to inodes: each LOOKUP reply is one, FORGET
 * gives them back, and the inode lives while the kernel holds any.  The
 * kernel keeps what it looked up until memory runs short, so past
 * -o max_inodes the names it looked up least recently, files first, are
 * dropped from its dentry cache (it then forgets them) and the daemon's
 * memory stays bounded. */

/* One more kernel lookup of @ino; caller holds the parent's lock. */
void kvt_count_lookup(struct kvt_fs *fs, struct kvt_inode *ino);
/* The kernel gives back @n lookups of @ino. */
void kvt_forget(struct kvt_fs *fs, struct kvt_inode *ino, uint64_t n);
/* @ino leaves the bound's order (at free). */
void kvt_lru_forget(struct kvt_fs *fs, struct kvt_inode *ino);
/* @ino is now @name in directory @parent (rename). */
void kvt_lru_rename(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_inode *parent,
		    const char *name);
void kvt_lru_free_all(struct kvt_fs *fs);
