/* Names resolved to inodes, with the size check that makes a torn name
 * vanish at lookup; and the attributes the kernel is given. */
#pragma once
#include "inode.h"
#include "notify.h"

/* Attributes of a file, from memory (caller holds ino->lock). */
void kvt_file_attr(struct kvt_inode *ino, struct stat *st);
/* Attributes of any inode; no inode lock held. */
int kvt_inode_attr(struct kvt_fs *fs, struct kvt_inode *ino, struct stat *st);

/* The owner of a new name in the directory @pd, made by @ctx: the caller,
 * and the directory's group when it is set-group-ID (as ext4 does).
 * True when it is (a new directory is set-group-ID too). */
bool kvt_new_owner(struct kvt_fs *fs, struct kvt_dir *pd, const struct fuse_ctx *ctx,
		   uid_t *uid, gid_t *gid);

/* Replies to GETATTR or SETATTR: @ino's attributes, or the error @ret. */
void kvt_reply_attr(fuse_req_t req, struct kvt_fs *fs, struct kvt_inode *ino, int ret);

/* The reply to a lookup of @ino (caller holds its parent's lock, or the
 * inode is not visible yet); a directory's attributes are @dir_st, its
 * lower directory's as just seen. */
void kvt_fill_entry(struct kvt_fs *fs, struct kvt_inode *ino, const struct stat *dir_st,
		    struct fuse_entry_param *e);

/* Looks @name up in @parent, whose lower directory is @pd: the inode the
 * kernel gets in @e, counted as one more lookup.  A torn name is purged
 * (@note says what the kernel must forget) and answers ENOENT. */
int kvt_do_lookup(struct kvt_fs *fs, struct kvt_inode *parent, struct kvt_dir *pd,
		  const char *name, struct fuse_entry_param *e, struct kvt_note *note);
/* The same, of the directory @made that the caller just made at @name:
 * its metadata is known (no look at the lower disk). */
int kvt_lookup_made(struct kvt_fs *fs, struct kvt_inode *parent, struct kvt_dir *pd,
		    const char *name, struct kvt_dir *made, struct fuse_entry_param *e,
		    struct kvt_note *note);

/* At OPEN and GETATTR: checks that @ino's name still resolves to a whole
 * object.  A file unlinked while the kernel holds it is served from
 * memory for as long as its object exists.  -ESTALE when another mount
 * put another version at the name: @ino is detached, keeping its own
 * version for those who hold it open, and @note makes the kernel forget
 * the name's entry, so that a walk of the path finds the new version's
 * inode (the kernel's open and stat retry on ESTALE). */
int kvt_resolve_inode(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_note *note);
/* The same, before an open of the object, which checks its size itself:
 * a name that still holds @ino's record costs one look, not two. */
int kvt_resolve_inode_to_open(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_note *note);

/* Takes a published record into @ino (caller holds ino->lock): @rec is
 * moved, @rst is the record file, @ost the object (NULL: unknown). */
void kvt_inode_take_record(struct kvt_inode *ino, struct kvt_record *rec,
			   const struct stat *rst, const struct stat *ost);
/* The identity of a record (hash, size, reference), without xattrs. */
void kvt_record_id(struct kvt_record *dst, const struct kvt_record *src);
