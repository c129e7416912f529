/* The FUSE low-level operation table and what its parts share. */
#pragma once
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "inode.h"

/* 1 MiB less four pages (see main.c). */
#define KVT_MAX_READ 1032192

extern const struct fuse_lowlevel_ops kvt_fuse_ops;

static inline struct kvt_fs *kvt_fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static inline struct kvt_inode *kvt_inode_of(struct kvt_fs *fs, fuse_ino_t n)
{
	return n == FUSE_ROOT_ID ? fs->root : (struct kvt_inode *)(uintptr_t)n;
}

static inline fuse_ino_t kvt_nodeid_of(struct kvt_fs *fs, struct kvt_inode *ino)
{
	return ino == fs->root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)ino;
}
