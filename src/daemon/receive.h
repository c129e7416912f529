/* Requests read from /dev/fuse with a WRITE's payload at a page boundary,
 * so that a staged write goes to the lower disk with O_DIRECT straight
 * from the request buffer instead of being copied into an aligned one. */
#pragma once
#include <sys/types.h>
#include <sys/uio.h>

struct fuse_session;

/* Reads @se's requests that way from now on (after fuse_session_mount).
 * Returns 0, or -errno and the session reads as before. */
int kvt_receive_install(struct fuse_session *se);
/* Reads one request from @fd into libfuse's @buf of @len bytes, the way
 * kvt_receive_install() makes the session read (for its tests). */
ssize_t kvt_receive_read(int fd, void *buf, size_t len);
/* Writes a reply to @fd, as kvt_receive_install() makes the session
 * write (for its tests): the reply to the INIT request read last says
 * that lookups and listings of one directory may come in parallel, when
 * the kernel offered it. */
ssize_t kvt_receive_writev(int fd, const struct iovec *iov, int count);
/* The bytes of the WRITE this thread is serving, which libfuse hands to
 * the write op as @buf: where they are (page-aligned when the read could
 * place them so), or @buf itself. */
const char *kvt_receive_payload(const char *buf);
