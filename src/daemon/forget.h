/* The kernel's references to inodes: each LOOKUP reply is one, FORGET
 * gives them back, and the inode lives while the kernel holds any.  The
 * kernel keeps what it looked up until memory runs short, so past
 * -o max_inodes files the oldest names are dropped from its dentry cache
 * (it then forgets them) and the daemon's memory stays bounded. */
#pragma once
#include "inode.h"

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
