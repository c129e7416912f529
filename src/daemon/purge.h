/* Purging torn names: a name whose object is missing, of the wrong size or
 * of the wrong hash goes, with its object (name.h), and the kernel is told
 * to forget it (notify.h).  One log line and the counters say what
 * happened. */
#pragma once
#include "inode.h"
#include "notify.h"

enum kvt_torn {
	KVT_TORN_MISSING, /* the object file is gone */
	KVT_TORN_SIZE,    /* its size differs from the record's */
	KVT_TORN_HASH,    /* its bytes differ from the record's hash */
	KVT_TORN_SHORT,   /* a read found fewer bytes than recorded */
	KVT_TORN_RECORD,  /* the name record does not parse */
	KVT_UNSYNCED,     /* not torn: -o sync, and its publication's sync failed */
};

struct kvt_torn_info {
	enum kvt_torn why;
	uint64_t found_size;
	kvt_hash found_hash;
	int err;          /* KVT_UNSYNCED: the sync's errno */
};

/* Purges @name in @p, whose lower directory is @pd (caller holds
 * p->lock), whose inode (if any) is @child and whose record is @rec (NULL
 * when it does not parse).  @note gets what the kernel must forget, to
 * send once no lock is held. */
void kvt_purge_locked(struct kvt_fs *fs, struct kvt_inode *p, struct kvt_dir *pd,
		      const char *name, struct kvt_inode *child,
		      const struct kvt_record *rec, const struct kvt_torn_info *torn,
		      struct kvt_note *note);

/* Purges the version @rec of @ino, found torn while serving it; takes the
 * parent's lock.  If @ino shows another version by now, only the object
 * goes. */
void kvt_purge_inode(struct kvt_fs *fs, struct kvt_inode *ino,
		     const struct kvt_record *rec, const struct kvt_torn_info *torn,
		     struct kvt_note *note);

/* Takes back the publication of @rec at @ino, whose sync failed with
 * -@err under -o sync, before the call that published (a rename, a
 * close, an fsync) answers that error: the name goes, if it still shows
 * @rec, with the object's reference (other names that share its bytes
 * keep theirs).  The kernel is told to forget the name, and @old_parent's
 * @old_name when not 0 (a rename's source, which the kernel keeps on an
 * error).  No lock held. */
void kvt_unpublish(struct kvt_fs *fs, struct kvt_inode *ino, const struct kvt_record *rec,
		   int err, fuse_ino_t old_parent, const char *old_name);

/* The last KVT_RECENT_PURGES purges, oldest first, a line each:
 * "<unix seconds> <the log line>" (user.kvtierfs.purges); without
 * @paths, "<unix seconds> " KVT_PURGE_WITHHELD: the line names a path
 * (in any user's directory) and the hash of the bytes found there. */
#define KVT_PURGE_WITHHELD "purged a name (which, and why, is shown to root only)"
GString *kvt_purges_format(struct kvt_fs *fs, bool paths);
