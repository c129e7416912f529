/* Telling the kernel to forget what it caches: a name's dentry and an
 * inode's attributes and pages.  The kernel may hold the very locks an
 * invalidation waits for while it waits for one of our replies (a
 * directory's lock during LOOKUP, a page during READ), so invalidations
 * go to a thread of their own; only a dentry that a reply must not
 * outrun is invalidated at once, from a request during which the kernel
 * holds no lock on its directory (OPEN, GETATTR, READ). */
#pragma once
#include "fs.h"

/* What the kernel must forget. */
struct kvt_note {
	fuse_ino_t parent; /* with @name: the dentry; 0: none */
	char *name;
	fuse_ino_t child;  /* the inode; 0: none */
};

/* Sends @note and clears it; with @sync_entry the dentry before
 * returning. */
void kvt_notify(struct kvt_fs *fs, struct kvt_note *note, bool sync_entry);
/* Queues the invalidation of @parent/@name. */
void kvt_notify_entry(struct kvt_fs *fs, fuse_ino_t parent, const char *name);

struct kvt_notifier *kvt_notifier_new(struct kvt_fs *fs);
/* Sends what is queued, then stops; call before the session ends. */
void kvt_notifier_free(struct kvt_notifier *n);
