/* src/receive.c: requests read from a pipe (one message at a time, as
 * /dev/fuse gives them) into a buffer laid out as libfuse's: a WRITE's
 * bytes land page-aligned and are found by the pointer libfuse passes on;
 * every other request, a WRITE of another layout, and a buffer with no
 * room to align in, come out exactly as sent. */
#include <linux/fuse.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/receive.h"

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

	printf("1..8\n");
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
	free(base);
	return n_fail ? 1 : 0;
}
