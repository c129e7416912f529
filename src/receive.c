/* Page-aligned WRITE payloads (receive.h).
 *
 * libfuse reads a request into one buffer, and a WRITE's bytes follow the
 * 80 bytes of its two headers, at no useful alignment.  /dev/fuse reads
 * into an iovec, so the read here gives the headers their 80 bytes at the
 * start of libfuse's buffer and the rest the first page boundary after
 * them, inside the same buffer: libfuse sizes it max_write + one page, so
 * the payload fits.  A request that is not a WRITE is moved back behind
 * its header at once, as libfuse expects it; a WRITE's bytes stay where
 * they are, and the write op asks for them by the pointer libfuse gives
 * it.  libfuse serves a request on the thread that read it, so a thread
 * variable carries that pointer from the read to the op. */
#include "receive.h"

#include "fs.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define HEADERS (sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in))
#define PAGE 4096u

/* The payload of the WRITE this thread read last: where libfuse thinks
 * it is, and where it is. */
static __thread const char *libfuse_at;
static __thread const char *actual_at;

/* A WRITE laid out as assumed: its two headers, then exactly its bytes
 * (a protocol before 7.9 had a shorter fuse_write_in; then the request is
 * moved back whole, as any other). */
static bool is_write(const char *b, size_t n)
{
	const struct fuse_in_header *ih = (const void *)b;
	const struct fuse_write_in *wi = (const void *)(b + sizeof(*ih));

	return ih->opcode == FUSE_WRITE && ih->len == n && n == HEADERS + wi->size;
}

ssize_t kvt_receive_read(int fd, void *buf, size_t len)
{
	char *b = buf;
	char *body = (char *)(((uintptr_t)b + HEADERS + PAGE - 1) & ~(uintptr_t)(PAGE - 1));
	size_t gap = (size_t)(body - (b + HEADERS));
	struct iovec iov[2];
	ssize_t n;

	libfuse_at = actual_at = NULL;
	/* The kernel wants room for headers + max_write; libfuse gave a
	 * page more than that, and the gap takes some of it. */
	if (len < HEADERS + PAGE || gap > PAGE - HEADERS)
		return read(fd, buf, len);
	iov[0] = (struct iovec){ .iov_base = b, .iov_len = HEADERS };
	iov[1] = (struct iovec){ .iov_base = body, .iov_len = len - HEADERS - gap };
	n = readv(fd, iov, 2);
	if (n <= (ssize_t)HEADERS)
		return n;
	if (is_write(b, (size_t)n)) {
		libfuse_at = b + HEADERS;
		actual_at = body;
	} else {
		memmove(b + HEADERS, body, (size_t)n - HEADERS);
	}
	return n;
}

static ssize_t receive_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	return kvt_receive_read(fd, buf, len);
}

static ssize_t receive_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	return writev(fd, iov, count);
}

/* Replies keep going out by splice (splice.h): libfuse uses splice only
 * where the custom io has it. */
static ssize_t receive_splice_send(int fdin, off_t *offin, int fdout, off_t *offout,
				   size_t len, unsigned int flags, void *userdata)
{
	(void)userdata;
	return splice(fdin, offin, fdout, offout, len, flags);
}

int kvt_receive_install(struct fuse_session *se)
{
	static const struct fuse_custom_io io = {
		.read = receive_read,
		.writev = receive_writev,
		.splice_send = receive_splice_send,
	};

	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}

const char *kvt_receive_payload(const char *buf)
{
	return buf == libfuse_at ? actual_at : buf;
}
