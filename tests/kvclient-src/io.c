/*
 * kvclient: buffers and the read and write loops, with what O_DIRECT asks
 * of them (aligned buffers with room for a whole last page).
 */
#include "kvclient.h"

unsigned char *alloc_buf(size_t len)
{
	void *p;
	size_t n = (len + 2 * ALIGN) / ALIGN * ALIGN;

	if (posix_memalign(&p, ALIGN, n))
		die("out of memory (%zu bytes)", n);
	memset(p, 0, n);
	return p;
}

int dflag(void)
{
	return O.odirect > 0 ? O_DIRECT : 0;
}

/*
 * write() the whole buffer with one call (vLLM) or in chunks.  On a short
 * write, one more write of the rest is made to learn the errno.
 * Returns 0 or an errno.
 */
int write_block(int fd, const unsigned char *buf, size_t len,
		size_t chunk, size_t *done)
{
	size_t off = 0;

	*done = 0;
	while (off < len) {
		size_t n = chunk && chunk < len - off ? chunk : len - off;
		ssize_t r = write(fd, buf + off, n);

		if (r < 0)
			return errno ? errno : EIO;
		off += (size_t)r;
		*done = off;
		if ((size_t)r < n) {
			r = write(fd, buf + off, len - off);
			if (r < 0)
				return errno ? errno : EIO;
			return EIO; /* short write, no error reported */
		}
	}
	return 0;
}

/*
 * Read a whole file without knowing its size (LMCache readinto, then a
 * read to EOF).  Returns bytes read, -1 with errno on error.
 */
ssize_t read_whole(int fd, unsigned char *buf, size_t cap)
{
	size_t got = 0;

	if (dflag())
		cap = (cap + ALIGN - 1) / ALIGN * ALIGN; /* alloc_buf has room */
	while (got < cap) {
		ssize_t n = read(fd, buf + got, cap - got);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (dflag() && got % ALIGN)
			break; /* O_DIRECT: a partial page means EOF */
	}
	return (ssize_t)got;
}
