/* Purging torn names: a name whose object is missing, of the wrong size or
 * of the wrong hash goes, with its object, and the kernel is told to forget
 * it.  One log line and the counters say what happened. */
#pragma once
#include "fuse_ops.h"

enum kvt_torn {
	KVT_TORN_MISSING, /* the object file is gone */
	KVT_TORN_SIZE,    /* its size differs from the record's */
	KVT_TORN_HASH,    /* its bytes differ from the record's hash */
	KVT_TORN_SHORT,   /* a read found fewer bytes than recorded */
	KVT_TORN_RECORD,  /* the name record does not parse */
};

struct kvt_torn_info {
	enum kvt_torn why;
	uint64_t found_size;
	kvt_hash found_hash;
};

/* What the kernel must forget after a purge, sent once no lock is held. */
struct kvt_purge_note {
	fuse_ino_t parent; /* 0: nothing to send */
	char *name;
	fuse_ino_t child;  /* 0: the kernel has no inode for it */
};

/* Purges @name in @p (caller holds p->lock), whose inode (if any) is
 * @child and whose record is @rec (NULL when it does not parse). */
void kvt_purge_locked(struct kvt_fs *fs, struct kvt_inode *p, const char *name,
		      struct kvt_inode *child, const struct kvt_record *rec,
		      const struct kvt_torn_info *torn, struct kvt_purge_note *note);

/* Purges the version @rec of @ino, found torn while serving it; takes the
 * parent's lock.  If @ino shows another version by now, only the object
 * goes. */
void kvt_purge_inode(struct kvt_fs *fs, struct kvt_inode *ino,
		     const struct kvt_record *rec, const struct kvt_torn_info *torn,
		     struct kvt_purge_note *note);

/* Sends @note to the kernel and clears it.  With @sync_entry the dentry is
 * invalidated before returning, so that the caller's reply is not
 * followed by a stale positive lookup; only for requests during which the
 * kernel holds no lock on the parent directory (OPEN, GETATTR, READ).
 * The inode's attributes and pages are invalidated by the notifier thread:
 * a read request may hold the very pages that invalidation waits for. */
void kvt_purge_notify(struct kvt_fs *fs, struct kvt_purge_note *note, bool sync_entry);

void kvt_notifier_start(struct kvt_fs *fs);
/* Waits for queued notifications; call before the session ends. */
void kvt_notifier_stop(struct kvt_fs *fs);
