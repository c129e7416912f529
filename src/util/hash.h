/* Object identity: XXH3-128 of an object's bytes, through libxxhash's
 * runtime-dispatched (AVX2/AVX512) entry points. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KVT_HASH_HEX_LEN 32

typedef struct {
	uint8_t b[16]; /* XXH128 canonical (big-endian) form */
} kvt_hash;

void kvt_hash_buf(const void *buf, size_t len, kvt_hash *out);
/* Hashes the first @size bytes of @fd; -ENODATA if the file holds fewer,
 * the read's -errno on an I/O error.  @copy: NULL, or @size bytes that
 * receive the bytes hashed. */
int kvt_hash_fd(int fd, uint64_t size, kvt_hash *out, void *copy);
void kvt_hash_hex(const kvt_hash *h, char out[KVT_HASH_HEX_LEN + 1]);
bool kvt_hash_parse(const char *hex, size_t len, kvt_hash *out);
bool kvt_hash_equal(const kvt_hash *a, const kvt_hash *b);

/* Incremental hashing of bytes that arrive in order. */
typedef struct kvt_hash_stream kvt_hash_stream;
kvt_hash_stream *kvt_hash_stream_new(void);
void kvt_hash_stream_free(kvt_hash_stream *hs);
void kvt_hash_stream_reset(kvt_hash_stream *hs);
void kvt_hash_stream_update(kvt_hash_stream *hs, const void *buf, size_t len);
void kvt_hash_stream_digest(kvt_hash_stream *hs, kvt_hash *out);
