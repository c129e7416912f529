/* XXH3-128 over buffers and files.  Debian's libxxhash 0.8.1 exports the
 * plain XXH3 functions compiled for SSE2 only; the *_dispatch variants pick
 * AVX2/AVX512 at run time and are several times faster. */
#include "hash.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>
#include <xxh_x86dispatch.h>

#define HASH_CHUNK (1u << 20)

static void canonical(XXH128_hash_t h, kvt_hash *out)
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, h);
	memcpy(out->b, c.digest, sizeof(out->b));
}

void kvt_hash_buf(const void *buf, size_t len, kvt_hash *out)
{
	canonical(XXH3_128bits_dispatch(buf, len), out);
}

int kvt_hash_fd(int fd, uint64_t size, kvt_hash *out, void *copy)
{
	XXH3_state_t *st = XXH3_createState();
	/* Read into the copy when there is one, else through a chunk. */
	char *buf = copy ? NULL : malloc(HASH_CHUNK);
	uint64_t off = 0;
	int ret = 0;

	if (!st || (!copy && !buf)) {
		ret = -ENOMEM;
		goto out;
	}
	XXH3_128bits_reset(st);
	/* One readahead of the whole object instead of the kernel's ramp-up
	 * of small sequential reads: a cold object is read at disk speed. */
	posix_fadvise(fd, 0, size, POSIX_FADV_WILLNEED);
	while (off < size) {
		size_t want = size - off < HASH_CHUNK ? size - off : HASH_CHUNK;
		char *to = copy ? (char *)copy + off : buf;
		ssize_t n = pread(fd, to, want, off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			goto out;
		}
		if (n == 0) {
			ret = -ENODATA;
			goto out;
		}
		XXH3_128bits_update_dispatch(st, to, n);
		off += n;
	}
	canonical(XXH3_128bits_digest(st), out);
out:
	free(buf);
	XXH3_freeState(st);
	return ret;
}

void kvt_hash_hex(const kvt_hash *h, char out[KVT_HASH_HEX_LEN + 1])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < 16; i++) {
		out[2 * i] = digits[h->b[i] >> 4];
		out[2 * i + 1] = digits[h->b[i] & 15];
	}
	out[KVT_HASH_HEX_LEN] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

bool kvt_hash_parse(const char *hex, size_t len, kvt_hash *out)
{
	if (len != KVT_HASH_HEX_LEN)
		return false;
	for (int i = 0; i < 16; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		out->b[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

bool kvt_hash_equal(const kvt_hash *a, const kvt_hash *b)
{
	return memcmp(a->b, b->b, sizeof(a->b)) == 0;
}

struct kvt_hash_stream {
	XXH3_state_t *st;
};

kvt_hash_stream *kvt_hash_stream_new(void)
{
	kvt_hash_stream *hs = malloc(sizeof(*hs));

	if (!hs)
		return NULL;
	hs->st = XXH3_createState();
	if (!hs->st) {
		free(hs);
		return NULL;
	}
	XXH3_128bits_reset(hs->st);
	return hs;
}

void kvt_hash_stream_free(kvt_hash_stream *hs)
{
	if (!hs)
		return;
	XXH3_freeState(hs->st);
	free(hs);
}

void kvt_hash_stream_reset(kvt_hash_stream *hs)
{
	XXH3_128bits_reset(hs->st);
}

void kvt_hash_stream_update(kvt_hash_stream *hs, const void *buf, size_t len)
{
	XXH3_128bits_update_dispatch(hs->st, buf, len);
}

void kvt_hash_stream_digest(kvt_hash_stream *hs, kvt_hash *out)
{
	canonical(XXH3_128bits_digest(hs->st), out);
}
