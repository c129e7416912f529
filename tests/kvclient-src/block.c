/*
 * kvclient: the block format; filling a block, and checking what is read
 * back against it.
 *
 * Block format.  A block is a function of (key, version, size) only, so any
 * reader can check it without a shared table:
 *
 *     bytes  0..7   key      (u64, little endian)
 *     bytes  8..15  version  (u64, little endian, >= 1)
 *     bytes 16..23  size     (u64, little endian, the whole file length)
 *     bytes 24..31  check    mix64 of the three above (a torn or foreign
 *                            header is recognised as such)
 *     bytes 32..    counter-based splitmix64 stream seeded from
 *                   (key, version): the 8-byte word at file offset 8*i is
 *                   mix64(seed + (i + 1) * golden), little endian.
  *
  * The stream is counter based (not a sequential xorshift), so the expected
  * bytes at any offset are computed directly: tail reads at arbitrary offsets
  * (llm-d) are checked without generating the head.
  */
 #include "kvclient.h"
 
 uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t hdr_check(uint64_t key, uint64_t ver, uint64_t size)
{
	return mix64(key ^ mix64(ver + GOLDEN) ^ mix64(size ^ HDR_MAGIC));
}

static uint64_t stream_seed(uint64_t key, uint64_t ver)
{
	return mix64(key * GOLDEN + 0x1234567) ^ mix64(ver ^ HDR_MAGIC);
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* The expected 8-byte word at file offset 8*w (little-endian value). */
static uint64_t block_word(uint64_t w, uint64_t key, uint64_t ver,
			   uint64_t size, uint64_t seed)
{
	switch (w) {
	case 0: return key;
	case 1: return ver;
	case 2: return size;
	case 3: return hdr_check(key, ver, size);
	default: return mix64(seed + (w + 1) * GOLDEN);
	}
}

void fill_block(unsigned char *buf, uint64_t size, uint64_t key,
		uint64_t ver)
{
	uint64_t seed = stream_seed(key, ver);
	uint64_t w, nw = size / 8;
	unsigned char tmp[8];

	for (w = 0; w < nw; w++) {
		uint64_t v = block_word(w, key, ver, size, seed);

		if (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)
			memcpy(buf + 8 * w, &v, 8);
		else
			put64(buf + 8 * w, v);
	}
	if (size % 8) {
		put64(tmp, block_word(nw, key, ver, size, seed));
		memcpy(buf + 8 * nw, tmp, size % 8);
	}
}

/*
 * Compare buf[0..len) with the expected bytes at file offsets off..off+len
 * of block (key, ver, size).  Returns -1 if equal, else the file offset of
 * the first differing byte.
 */
long long check_range(const unsigned char *buf, uint64_t off,
		      uint64_t len, uint64_t key, uint64_t ver,
		      uint64_t size)
{
	uint64_t seed = stream_seed(key, ver);
	uint64_t pos = off, end = off + len;

	while (pos < end) {
		uint64_t w = pos / 8, in = pos % 8;
		uint64_t n = 8 - in;
		unsigned char exp[8];

		if (n > end - pos)
			n = end - pos;
		put64(exp, block_word(w, key, ver, size, seed));
		if (in == 0 && n == 8 &&
		    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) {
			/* fast path */
			uint64_t got, want = block_word(w, key, ver, size, seed);

			memcpy(&got, buf + (pos - off), 8);
			if (got == want) {
				pos += 8;
				continue;
			}
		}
		for (uint64_t i = 0; i < n; i++)
			if (buf[pos - off + i] != exp[in + i])
				return (long long)(pos + i);
		pos += n;
	}
	return -1;
}

struct hdr {
	uint64_t key, ver, size;
	int valid;
};

static struct hdr parse_hdr(const unsigned char *buf, size_t len)
{
	struct hdr h = { 0, 0, 0, 0 };

	if (len < HDR_LEN)
		return h;
	h.key = get64(buf);
	h.ver = get64(buf + 8);
	h.size = get64(buf + 16);
	h.valid = get64(buf + 24) == hdr_check(h.key, h.ver, h.size) &&
		  h.ver >= 1 && h.size >= HDR_LEN;
	return h;
}

/*
 * Check that buf[0..len) (a whole file, as read) is one complete valid block.
 * want_key: expected key (or UINT64_MAX: take it from the header).
 * want_ver: expected version (0 = any, reported in *got_ver).
 * want_size: expected length (0 = the header's).
 * Reports a failure and returns -1, else returns 0.
 */
static int whole_ok(const char *path, const unsigned char *buf, size_t len,
		    uint64_t want_key, uint64_t want_ver, uint64_t want_size,
		    uint64_t *got_key, uint64_t *got_ver)
{
	struct hdr h = parse_hdr(buf, len);
	long long bad;

	if (want_size && len != want_size) {
		failf(path, (long long)len, "length %zu, expected %" PRIu64
		      " (%s)", len, want_size,
		      len < want_size ? "torn/short" : "too long");
		return -1;
	}
	if (!h.valid) {
		if (want_key != UINT64_MAX) {
			uint64_t v = want_ver ? want_ver : 1;

			bad = check_range(buf, 0, len < HDR_LEN ? len : HDR_LEN,
					  want_key, v, want_size ? want_size : len);
			failf(path, bad < 0 ? 0 : bad,
			      "block header is not valid (torn or foreign data)");
		} else {
			failf(path, 0,
			      "block header is not valid (torn or foreign data)");
		}
		return -1;
	}
	if (want_key != UINT64_MAX && h.key != want_key) {
		failf(path, 0, "holds key %" PRIu64 ", expected key %" PRIu64,
		      h.key, want_key);
		return -1;
	}
	if (want_ver && h.ver != want_ver) {
		failf(path, 8, "holds version %" PRIu64 ", expected version %"
		      PRIu64, h.ver, want_ver);
		return -1;
	}
	if (h.size != len) {
		failf(path, (long long)(len < h.size ? len : h.size),
		      "length %zu but header (version %" PRIu64 ") says %" PRIu64
		      " (%s)", len, h.ver, h.size,
		      len < h.size ? "torn/short" : "too long");
		return -1;
	}
	bad = check_range(buf, 0, len, h.key, h.ver, h.size);
	if (bad >= 0) {
		failf(path, bad, "data differs from key %" PRIu64 " version %"
		      PRIu64 " (%zu-byte block)", h.key, h.ver, len);
		return -1;
	}
	if (got_key)
		*got_key = h.key;
	if (got_ver)
		*got_ver = h.ver;
	return 0;
}

/* Blocks read back wrong (check_whole failed, or a reader saw a version
 * it must not see): the wrong= of the summaries. */
atomic_ullong g_wrong;

int check_whole(const char *path, const unsigned char *buf, size_t len,
		uint64_t want_key, uint64_t want_ver, uint64_t want_size,
		uint64_t *got_key, uint64_t *got_ver)
{
	int r = whole_ok(path, buf, len, want_key, want_ver, want_size,
			 got_key, got_ver);

	if (r < 0)
		atomic_fetch_add(&g_wrong, 1);
	return r;
}
