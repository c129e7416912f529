/* Symbolic links and special files (FIFOs, sockets, device nodes): a
 * name that is a record and nothing else, no object.  Made for SYMLINK
 * (namespace.c) and MKNOD (file.c, which makes regular files itself). */
#pragma once
#include "inode.h"

/* Makes @rec (moved) under @name in @parent only if nothing is there, with
 * mode @mode; the reply is the lookup's. */
void kvt_make_node(fuse_req_t req, fuse_ino_t parent, const char *name,
		   struct kvt_record *rec, mode_t mode);
/* mknod of a FIFO, socket or device node. */
void kvt_make_special(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      dev_t rdev);
