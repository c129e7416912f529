/* Zero-copy replies: object bytes go from the lower page cache to the
 * FUSE device through a pipe, without being copied into the daemon. */
#pragma once
#include <stddef.h>
#include <sys/types.h>

/* Puts exactly @len bytes of @fd at @off into this thread's pipe and
 * returns the pipe's read end, to hand to fuse_reply_data().  If the file
 * ends first, the pipe is emptied, *@got says how many bytes there were
 * and the answer is -ENODATA.  Other -errno: use a plain read instead. */
int kvt_splice_fill(int fd, off_t off, size_t len, size_t *got);
/* Empties the pipe after a reply (that may have failed half way), so that
 * no byte of this reply can end up in the next one. */
void kvt_splice_reset(int rfd);
