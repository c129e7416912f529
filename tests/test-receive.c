/* src/daemon/receive.c: requests read from a pipe (one message at a time, as
 * /dev/fuse gives them) into a buffer laid out as libfuse's: a WRITE's
 * bytes land page-aligned and are found by the pointer libfuse passes on;
 * every other request, a WRITE of another layout, and a buffer with no
 * room to align in, come out exactly as sent.  The reply to INIT says
 * that lookups of one directory may come in parallel when the kernel's
 * INIT offered it, and no other reply is changed. */
#include <linux/fuse.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "receive.h"

#define HEADERS (sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in))
#define MAX_WRITE (1u << 20)
#define LEN (MAX_WRITE + 4096) /* libfuse's buffer after INIT */

static int n_test, n_fail;

static void ok(bool cond, const char *desc)
{
	n_test++;
	n_fail += !cond;
	printf("%sok %d - %s\n", cond ? "" : "not ", n_test, desc);
}

/* A request of @n bytes: opcode, a fuse_write_in whose size says
 * @size_field, then bytes i * 7 + @seed. */
static char *request(uint32_t opcode, size_t n, uint32_t size_field, unsigned seed)
{
	char *m = calloc(1, n);
	struct fuse_in_header *ih = (void *)m;

	ih->len = (uint32_t)n;
	ih->opcode = opcode;
	ih->unique = 42;
	if (n >= HEADERS)
		((struct fuse_write_in *)(m + sizeof(*ih)))->size = size_field;
	for (size_t i = HEADERS; i < n; i++)
		m[i] = (char)(i * 7 + seed);
	return m;
}

/* Sends @m (@n bytes) through a pipe and reads it back with
 * kvt_receive_read into @buf; the bytes read. */
static ssize_t pass(const char *m, size_t n, char *buf)
{
	int p[2];
	ssize_t got;

	if (pipe(p) || write(p[1], m, n) != (ssize_t)n)
		return -1;
	got = kvt_receive_read(p[0], buf, LEN);
	close(p[0]);
	close(p[1]);
	return got;
}

/* An INIT request of the kernel's size, offering @flags; unique 7. */
static char *init_request(uint32_t flags, size_t *n)
{
	char *m;
	struct fuse_init_in *ii;

	*n = sizeof(struct fuse_in_header) + sizeof(*ii);
	m = request(FUSE_INIT, *n, 0, 0);
	((struct fuse_in_header *)m)->unique = 7;
	ii = (void *)(m + sizeof(struct fuse_in_header));
	memset(ii, 0, sizeof(*ii));
	ii->major = 7;
	ii->minor = 45;
	ii->flags = flags;
	return m;
}

/* Writes a reply as libfuse does (header, then @out of @len bytes) for
 * @unique with kvt_receive_writev, and reads it back into @back; the
 * flags of the fuse_init_out read back. */
static uint32_t reply(uint64_t unique, const struct fuse_init_out *out, size_t len,
		      char *back)
{
	struct fuse_out_header oh = { .len = (uint32_t)(sizeof(oh) + len), .unique = unique };
	struct iovec iov[2] = { { &oh, sizeof(oh) }, { (void *)out, len } };
	int p[2];
	ssize_t got;

	if (pipe(p))
		return 0;
	got = kvt_receive_writev(p[1], iov, 2);
	if (got != (ssize_t)(sizeof(oh) + len) || read(p[0], back, (size_t)got) != got)
		got = 0;
	close(p[0]);
	close(p[1]);
	return got ? ((struct fuse_init_out *)(back + sizeof(oh)))->flags : 0;
}

/* @buf holds @m as sent, and no other place is claimed for its bytes. */
static bool as_sent(const char *buf, const char *m, size_t n)
{
	return memcmp(buf, m, n) == 0 && kvt_receive_payload(buf + HEADERS) == buf + HEADERS;
}

int main(void)
{
	char *base, *buf, *m;
	const char *payload;
	size_t n = HEADERS + 8192;

	printf("1..12\n");
	if (posix_memalign((void **)&base, 4096, LEN + 2 * 4096))
		return 1;
	buf = base + 16; /* where glibc puts a buffer it maps */

	m = request(FUSE_WRITE, n, 8192, 1);
	ok(pass(m, n, buf) == (ssize_t)n, "a WRITE of 8 KiB is read whole");
	payload = kvt_receive_payload(buf + HEADERS);
	ok(payload != buf + HEADERS && (uintptr_t)payload % 4096 == 0,
	   "its bytes are found at a page boundary, not behind the headers");
	ok(memcmp(payload, m + HEADERS, 8192) == 0 && memcmp(buf, m, HEADERS) == 0,
	   "the headers and the bytes are the ones sent");
	free(m);

	n = HEADERS + 5000;
	m = request(FUSE_SETXATTR, n, 0, 2);
	ok(pass(m, n, buf) == (ssize_t)n && as_sent(buf, m, n),
	   "a SETXATTR of 5000 bytes comes out as sent, and the WRITE before it is forgotten");
	free(m);

	m = request(FUSE_LOOKUP, 46, 0, 3);
	ok(pass(m, 46, buf) == 46 && memcmp(buf, m, 46) == 0,
	   "a LOOKUP shorter than the headers comes out as sent");
	free(m);

	n = HEADERS + 8192;
	m = request(FUSE_WRITE, n, 100, 4);
	ok(pass(m, n, buf) == (ssize_t)n && as_sent(buf, m, n),
	   "a WRITE whose fuse_write_in does not match its length comes out as sent");
	free(m);

	/* At page offset 4050 the first boundary after the headers leaves
	 * less room than max_write + the headers. */
	buf = base + 4050;
	m = request(FUSE_WRITE, n, 8192, 5);
	ok(pass(m, n, buf) == (ssize_t)n && as_sent(buf, m, n),
	   "with no room to align in the buffer, a WRITE comes out as sent");
	free(m);

	buf = base; /* page-aligned: the largest gap that fits */
	m = request(FUSE_WRITE, n, 8192, 6);
	ok(pass(m, n, buf) == (ssize_t)n &&
	   (uintptr_t)kvt_receive_payload(buf + HEADERS) % 4096 == 0 &&
	   memcmp(kvt_receive_payload(buf + HEADERS), m + HEADERS, 8192) == 0,
	   "a page-aligned buffer: the bytes land one page in");
	free(m);

	{
		struct fuse_init_out out = { .major = 7, .minor = 31,
					     .flags = FUSE_ASYNC_READ | FUSE_BIG_WRITES,
					     .max_write = MAX_WRITE };
		char back[sizeof(struct fuse_out_header) + sizeof(out)];
		uint32_t flags;

		buf = base + 16;
		m = init_request(FUSE_ASYNC_READ | FUSE_PARALLEL_DIROPS | FUSE_BIG_WRITES, &n);
		ok(pass(m, n, buf) == (ssize_t)n && memcmp(buf, m, n) == 0,
		   "the kernel's INIT comes out as sent");
		free(m);
		flags = reply(7, &out, sizeof(out), back);
		ok(flags == (FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_PARALLEL_DIROPS) &&
		   ((struct fuse_init_out *)(back + sizeof(struct fuse_out_header)))->max_write ==
			   MAX_WRITE && out.flags == (FUSE_ASYNC_READ | FUSE_BIG_WRITES),
		   "the reply to it says parallel directory operations, the rest as libfuse wrote it");
		ok(reply(7, &out, sizeof(out), back) == (FUSE_ASYNC_READ | FUSE_BIG_WRITES),
		   "a second reply with that unique is not changed");

		m = init_request(FUSE_ASYNC_READ | FUSE_BIG_WRITES, &n);
		pass(m, n, buf);
		free(m);
		ok(reply(7, &out, sizeof(out), back) == (FUSE_ASYNC_READ | FUSE_BIG_WRITES),
		   "an INIT that does not offer it: the reply is as libfuse wrote it");
	}
	free(base);
	return n_fail ? 1 : 0;
}
