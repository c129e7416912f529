/* Open files: what a handle holds (the object it reads, the version it
 * writes), and how a truncate without a handle finds the writer whose
 * open asked for it.  file.c opens and serves handles; attr.c truncates
 * through them. */
#pragma once
#include "inode.h"
#include "memcopy.h"

struct kvt_handle {
	struct kvt_live live;
	int fd;                /* readers: object bytes */
	struct kvt_record rec; /* readers of an object: which one (no xattrs) */
	guint purges;          /* the inode's purge count at open */
	struct kvt_stage *rstage; /* readers of an unpublished file */
	struct kvt_stage *wstage; /* writers: the version this handle writes */
	bool writer;
	bool cached;           /* counted in cache_readers */
	bool fresh;            /* in the inode's fresh_writers */
	struct kvt_copy *copy; /* fd is this verified copy's (memcopy.h) */
	pid_t opener;          /* the thread that opened it */
	uint64_t evict_key;    /* readers: the record pinned in the evictor */
};

/* A new handle, on fs->live_handles until kvt_handle_close. */
struct kvt_handle *kvt_handle_new(struct kvt_fs *fs);
void kvt_handle_close(struct kvt_fs *fs, struct kvt_handle *h);
struct kvt_handle *kvt_handle_of(struct fuse_file_info *fi);
/* The version a handle writes (NULL for a reader's handle). */
struct kvt_stage **kvt_handle_wstage(struct fuse_file_info *fi);
/* @h no longer waits for its open's O_TRUNC (caller holds ino->lock). */
void kvt_handle_unfresh(struct kvt_inode *ino, struct kvt_handle *h);
/* For a truncate without a handle from thread @pid: the version of the
 * handle of @ino that thread opened for writing and has not written
 * through yet (its open's O_TRUNC), or NULL (a truncate by path). */
struct kvt_stage **kvt_handle_trunc(struct kvt_inode *ino, pid_t pid);
