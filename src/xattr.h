/* Extended attributes: kvtierfs's own read-only user.kvtierfs.* names and
 * the clients' user.* attributes, which travel in the name record. */
#pragma once
#include "fuse_ops.h"

void kvt_op_getxattr(fuse_req_t req, fuse_ino_t n, const char *name, size_t size);
void kvt_op_setxattr(fuse_req_t req, fuse_ino_t n, const char *name,
		     const char *value, size_t size, int flags);
void kvt_op_listxattr(fuse_req_t req, fuse_ino_t n, size_t size);
void kvt_op_removexattr(fuse_req_t req, fuse_ino_t n, const char *name);
