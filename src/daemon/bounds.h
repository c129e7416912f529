/* Bounds that fail the one caller, not the mount.
 *
 * A file being written holds a stage (three descriptors: its bytes, an
 * O_DIRECT descriptor on them and its record file) and an inode outside
 * max_inodes, and the client xattrs of a file with no record (pending, or
 * unlinked) exist in this daemon's memory only.  Unbounded, one user
 * holding many empty temp files would leave everyone else's stores
 * failing with EMFILE, and one user setting xattrs would grow the daemon
 * until the OOM killer took the mount.  So:
 *
 *   - stages per uid (of the caller that begins the version), -o
 *     max_pending, and in all: over it the caller gets EDQUOT (over the
 *     mount's total, ENFILE);
 *   - client xattr bytes per file (names and values, pending or
 *     published), -o max_xattr_size: over it setxattr gets E2BIG;
 *   - memory held by the xattrs of files without a record, a quarter of
 *     -o xattr_memory per uid (of the caller that set them last), EDQUOT
 *     past it, and -o xattr_memory in all, ENOSPC past it;
 *   - bytes staged per uid, -o max_staged: a stage's bytes are root's
 *     files on the lower disk, past quotas and the root reserve, so one
 *     user could fill the disk for all.  A stage is charged the highest
 *     size it reached (a write's end, a truncate that grows it, the
 *     published bytes a rewrite starts from), given back once it is
 *     published or dropped; a write or truncate past the bound gets
 *     EDQUOT;
 *   - threads waiting per uid: a change in place waiting for the readers
 *     of the page cache (10 s) holds a FUSE thread, and so does an open
 *     waiting for copy memory (5 s); one user with many of them would
 *     leave none for others.  An eighth of -o max_threads per uid (1 at
 *     least) may wait for readers, the next change gets EBUSY at once;
 *     a sixteenth may wait for copy memory (memcopy.h counts them), the
 *     next open goes without its copy at once.  (An fsync of a directory
 *     syncs the caller's names only, file.c: it costs him what is his.)
 *
 * Every bound is counted against the uid of the request that begins the
 * charge, passed down from it: nothing is remembered per thread, so no
 * path can count the wrong user.  Each refusal is logged, one line every
 * 10 s at most. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "log.h"

struct kvt_fs;
struct kvt_inode;
struct kvt_options;
struct kvt_stage;

struct kvt_bounds {
	GMutex lock;
	GHashTable *pending;	    /* uid -> stages it holds (under lock) */
	GHashTable *staged;	    /* uid -> uint64_t * bytes staged (under lock) */
	uint64_t max_staged;	    /* bytes per uid */
	GHashTable *waiting;	    /* uid -> threads waiting (under lock) */
	guint max_waiting;	    /* per uid */
	guint pending_total;	    /* under lock */
	guint max_pending;	    /* per uid */
	guint max_pending_total;
	uint64_t max_xattr_size;    /* bytes of names and values, per file */
	GHashTable *xattr_users;    /* uid -> uint64_t * bytes charged (under lock) */
	uint64_t xattr_memory;	    /* bytes charged in all (under lock) */
	uint64_t max_xattr_memory;
	struct kvt_log_every pending_log, total_log, size_log, memory_log, staged_log,
		wait_log; /* under lock */
};

/* The bounds from @o; the descriptor limit (RLIMIT_NOFILE, once raised)
 * sets max_pending's default and the total, @lower_bytes (the size of the
 * lower file system; 0: unknown) max_staged's. */
void kvt_bounds_init(struct kvt_bounds *b, const struct kvt_options *o, uint64_t lower_bytes);
void kvt_bounds_fini(struct kvt_bounds *b);
/* "max_pending=N (M in all),..." for the mount's log line; g_free() it. */
char *kvt_bounds_describe(const struct kvt_bounds *b);

/* kvt_stage_new() for @uid, the caller of the request that begins it,
 * counted until the stage's last reference goes: -EDQUOT over the
 * caller's bound, -ENFILE over the mount's. */
int kvt_bounds_stage_new(struct kvt_fs *fs, uid_t uid, struct kvt_stage **out);
/* Room for @st to hold @end bytes (a write ending there, a truncate or a
 * copy to that size), charged to the uid it is counted against: -EDQUOT,
 * nothing charged, past that uid's -o max_staged.  A stage not begun by
 * kvt_bounds_stage_new, or published, is not counted. */
int kvt_bounds_stage_grow(struct kvt_fs *fs, struct kvt_stage *st, uint64_t end);
/* @st was published: its bytes are an object now, no more its uid's. */
void kvt_bounds_stage_published(struct kvt_fs *fs, struct kvt_stage *st);

/* Whether @uid may have one more thread wait (for @what, said in the log
 * line of a refusal); if so, counted until kvt_bounds_wait_end(). */
bool kvt_bounds_wait_begin(struct kvt_fs *fs, uid_t uid, const char *what);
void kvt_bounds_wait_end(struct kvt_fs *fs, uid_t uid);

/* The bytes -o max_xattr_size counts of @xattrs: names and values. */
uint64_t kvt_xattrs_size(GHashTable *xattrs);

/* Room for @uid to set @name to @size bytes on @ino (caller holds
 * ino->lock): -E2BIG past the file's bound (unless the change makes it no
 * larger); for a file without a record, -EDQUOT past @uid's share of the
 * memory, -ENOSPC past the mount's; 0, with the memory of the change
 * charged to @uid. */
int kvt_bounds_xattr_room(struct kvt_fs *fs, struct kvt_inode *ino, uid_t uid,
			  const char *name, size_t size);
/* Charges what @ino's xattrs hold in memory only, now, to whom they are
 * charged (caller holds ino->lock): after a change, a publication; and
 * nothing at its end (drop). */
void kvt_bounds_xattr_settle(struct kvt_fs *fs, struct kvt_inode *ino);
void kvt_bounds_xattr_drop(struct kvt_fs *fs, struct kvt_inode *ino);
