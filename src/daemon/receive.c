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
 * variable carries that pointer from the read to the op.
 *
 * The same reads and writes fix one thing in libfuse before 3.17: it
 * never tells the kernel that this file system takes lookups and
 * listings of one directory in parallel (FUSE_PARALLEL_DIROPS; libfuse
 * commit c9905341), so the kernel sent them one at a time, each waiting
 * for the lower disk's answers to the one before.  The reply to INIT
 * gets the flag when the kernel offered it. */
#include "receive.h"

#include "fs.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <stdbool.h>
#include <stddef.h>
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

/* The INIT request: its unique (0: none seen), and whether the kernel
 * offered parallel directory operations. */
static uint64_t init_unique;
static bool init_parallel;

static void note_init(const char *b, size_t n)
{
	struct fuse_in_header ih;
	uint32_t flags;

	/* Copied out: a buffer too small to align in may sit anywhere. */
	if (n < sizeof(ih) + offsetof(struct fuse_init_in, flags) + sizeof(flags))
		return;
	memcpy(&ih, b, sizeof(ih));
	if (ih.opcode != FUSE_INIT)
		return;
	memcpy(&flags, b + sizeof(ih) + offsetof(struct fuse_init_in, flags), sizeof(flags));
	__atomic_store_n(&init_parallel, (flags & FUSE_PARALLEL_DIROPS) != 0, __ATOMIC_RELAXED);
	__atomic_store_n(&init_unique, ih.unique, __ATOMIC_RELEASE);
}

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
	if (len < HEADERS + PAGE || gap > PAGE - HEADERS) {
		n = read(fd, buf, len);
		if (n > 0)
			note_init(buf, (size_t)n);
		return n;
	}
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
		note_init(b, (size_t)n);
	}
	return n;
}

static ssize_t receive_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	return kvt_receive_read(fd, buf, len);
}

ssize_t kvt_receive_writev(int fd, const struct iovec *iov, int count)
{
	const struct fuse_out_header *oh = iov[0].iov_base;
	uint64_t unique = __atomic_load_n(&init_unique, __ATOMIC_ACQUIRE);
	struct fuse_init_out out;
	struct iovec fixed[2];

	/* libfuse replies to INIT with its header and fuse_init_out, in two
	 * pieces. */
	if (!unique || count != 2 || iov[0].iov_len != sizeof(*oh) || oh->unique != unique ||
	    oh->error || iov[1].iov_len > sizeof(out) ||
	    iov[1].iov_len < offsetof(struct fuse_init_out, flags) + sizeof(out.flags))
		return writev(fd, iov, count);
	__atomic_store_n(&init_unique, 0, __ATOMIC_RELAXED);
	memcpy(&out, iov[1].iov_base, iov[1].iov_len);
	if (__atomic_load_n(&init_parallel, __ATOMIC_RELAXED))
		out.flags |= FUSE_PARALLEL_DIROPS;
	fixed[0] = iov[0];
	fixed[1] = (struct iovec){ .iov_base = &out, .iov_len = iov[1].iov_len };
	return writev(fd, fixed, 2);
}

static ssize_t receive_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	return kvt_receive_writev(fd, iov, count);
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
