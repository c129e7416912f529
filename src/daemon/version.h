/* Versions of a file being written, and their publication.
 *
 * A writer writes a version of its own in a stage (stage.h): O_TRUNC
 * starts one from nothing, so that two writers of one name (LMCache
 * processes) never publish a mix of theirs; without it a writer joins the
 * version pending, or starts one from the published bytes.  A version is
 * published by the rename of its temp name (namespace.c), or at the first
 * FLUSH or fsync of a file written under its own name, never at RELEASE:
 * close() returns before RELEASE is even sent. */
#pragma once
#include "inode.h"
#include "publish.h"

/* The version a writer writes, referenced in *@out (caller holds
 * ino->lock); -EAGAIN while the latest one is being published.  A new
 * one is counted against @uid, the request's caller (bounds.h).
 * *@ref_inode: the inode must take its pending reference (once no lock is
 * held). */
int kvt_version_begin(struct kvt_fs *fs, struct kvt_inode *ino, bool trunc, uid_t uid,
		      bool *ref_inode, struct kvt_stage **out);
/* The stage a writer's request goes to, referenced and read-locked: the
 * handle's version *@wstage (NULL: truncate by path, the inode's latest);
 * once that was published, a new version from the published bytes.
 * *@joined (if not NULL): it is a version begun before this call. */
int kvt_version_for_write(struct kvt_fs *fs, struct kvt_inode *ino, uid_t uid,
			  struct kvt_stage **wstage, struct kvt_stage **out, bool *joined);
void kvt_version_put(struct kvt_stage *st);

/* Publishes @st (NULL: the latest pending version) of a file written
 * under its own name, unless the name is a temp name. */
int kvt_publish_in_place(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_stage *st);
/* After kvt_store_publish put @pub at @ino's name: @ino shows it (caller
 * holds the parent's lock).  True when the caller must drop the inode's
 * pending reference, once it holds no lock. */
bool kvt_version_published(struct kvt_fs *fs, struct kvt_inode *ino,
			   struct kvt_published *pub, bool in_place);
/* kvt_publication_prepare of @st with what @ino's record says now. */
int kvt_version_prepare(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_stage *st,
			struct kvt_publication *prep);
/* Under the caller's locks: installs @prep at @d/@name (publish.h), or,
 * if nothing was prepared or @ino's metadata changed since, publishes @st
 * there whole (kvt_store_publish with @flags). */
int kvt_version_install(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_stage *st,
			struct kvt_publication *prep, struct kvt_dir *d, const char *name,
			unsigned int flags, struct kvt_published *out);
/* After kvt_publication_finish: @ino shows the record file as the name
 * shows it, if it still shows that record (takes ino->lock). */
void kvt_version_settle(struct kvt_inode *ino, const struct kvt_published *pub);
/* Wakes writers waiting for a publication of @ino to end. */
void kvt_version_wake(struct kvt_inode *ino);
/* A new size: truncate by path (@wstage NULL; by thread @tid) or
 * through a handle, by @uid: -EDQUOT past its bounds (bounds.h). */
int kvt_version_set_size(struct kvt_fs *fs, struct kvt_inode *ino, off_t size,
			 struct kvt_stage **wstage, pid_t tid, uid_t uid);
/* Whether thread @tid may change @ino's bytes in place now (caller holds
 * ino->lock).  Readers of the page cache read up to the kernel's size of
 * the inode, which a new version in place would change under them: with
 * any open, the change goes to a new inode instead.  -ESTALE the first
 * time, on which the kernel looks the name up again (a new inode, see
 * resolve.c) and retries the call once; a retry that comes back to this
 * inode (an open through /proc/self/fd) waits for those readers to close,
 * -EBUSY after 10 s, or at once when @uid has its share of threads
 * waiting already (bounds.h). */
int kvt_version_room(struct kvt_fs *fs, struct kvt_inode *ino, pid_t tid, uid_t uid);
/* The metadata a record of @ino gets, with its times if @set_times
 * (caller holds ino->lock). */
struct kvt_meta kvt_inode_meta(const struct kvt_inode *ino, bool set_times);
