/* The FUSE operations, by the file that holds them (fs.h says which
 * concern each file owns). */
#pragma once
#include "fs.h"

/* lookup.c */
void kvt_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void kvt_op_forget(fuse_req_t req, fuse_ino_t n, uint64_t nlookup);
void kvt_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void kvt_op_getattr(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi);
void kvt_op_statfs(fuse_req_t req, fuse_ino_t n);
/* attr.c */
void kvt_op_setattr(fuse_req_t req, fuse_ino_t n, struct stat *attr, int to_set,
		    struct fuse_file_info *fi);
/* file.c */
void kvt_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		   struct fuse_file_info *fi);
void kvt_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		  dev_t rdev);
void kvt_op_open(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi);
void kvt_op_read(fuse_req_t req, fuse_ino_t n, size_t size, off_t off,
		 struct fuse_file_info *fi);
void kvt_op_write(fuse_req_t req, fuse_ino_t n, const char *buf, size_t size, off_t off,
		  struct fuse_file_info *fi);
void kvt_op_flush(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi);
void kvt_op_fsync(fuse_req_t req, fuse_ino_t n, int datasync, struct fuse_file_info *fi);
void kvt_op_release(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi);
void kvt_op_fsyncdir(fuse_req_t req, fuse_ino_t n, int datasync, struct fuse_file_info *fi);
/* namespace.c */
void kvt_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void kvt_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void kvt_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void kvt_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		   fuse_ino_t newparent, const char *newname, unsigned int flags);
void kvt_op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name);
void kvt_op_readlink(fuse_req_t req, fuse_ino_t n);
void kvt_op_link(fuse_req_t req, fuse_ino_t n, fuse_ino_t newparent, const char *newname);
/* listing.c */
void kvt_op_opendir(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi);
void kvt_op_readdir(fuse_req_t req, fuse_ino_t n, size_t size, off_t off,
		    struct fuse_file_info *fi);
void kvt_op_readdirplus(fuse_req_t req, fuse_ino_t n, size_t size, off_t off,
			struct fuse_file_info *fi);
void kvt_op_releasedir(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi);
/* xattr.c */
void kvt_op_getxattr(fuse_req_t req, fuse_ino_t n, const char *name, size_t size);
void kvt_op_setxattr(fuse_req_t req, fuse_ino_t n, const char *name, const char *value,
		     size_t size, int flags);
void kvt_op_listxattr(fuse_req_t req, fuse_ino_t n, size_t size);
void kvt_op_removexattr(fuse_req_t req, fuse_ino_t n, const char *name);
