/* tests/collide A B [SIZE]: writes two files of SIZE bytes (4096), different
 * bytes, the same XXH3-128 (unseeded, default secret), and checks that they
 * are.  What a hostile user can build in a moment: XXH3 resists accidents,
 * not adversaries.
 *
 * In a stripe of 64 bytes, XXH3's long loop adds each 8-byte word w into
 * one accumulator and (w ^ key) low half times high half into the next.
 * A word whose low half equals its key's makes that product 0, so only w
 * itself is added: two such words, in two stripes of one block (each
 * stripe has its own key), can trade amounts between their high halves
 * and leave every accumulator as it was. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t key_at(size_t off)
{
	uint64_t k;

	memcpy(&k, XXH3_kSecret + off, sizeof(k));
	return k;
}

/* Word 0 of stripe 0 and word 0 of stripe 1, their high halves @h0, @h1. */
static void fill(unsigned char *buf, size_t size, uint32_t h0, uint32_t h1)
{
	uint64_t w0 = (uint64_t)h0 << 32 | (uint32_t)key_at(0);
	uint64_t w1 = (uint64_t)h1 << 32 | (uint32_t)key_at(8);

	memset(buf, 'k', size);
	memcpy(buf, &w0, sizeof(w0));
	memcpy(buf + 64, &w1, sizeof(w1));
}

static int write_file(const char *path, const unsigned char *buf, size_t size)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(buf, 1, size, f) != size || fclose(f)) {
		perror(path);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	size_t size = argc > 3 ? strtoul(argv[3], NULL, 0) : 4096;
	unsigned char *a, *b;
	XXH128_hash_t ha, hb;

	if (argc < 3 || size <= 240 || size > (64u << 20)) {
		fprintf(stderr, "usage: collide A B [SIZE: 241 .. 64 MiB]\n");
		return 2;
	}
	a = malloc(size);
	b = malloc(size);
	if (!a || !b)
		return 1;
	fill(a, size, 7, 9);
	fill(b, size, 8, 8);
	ha = XXH3_128bits(a, size);
	hb = XXH3_128bits(b, size);
	if (!memcmp(a, b, size) || !XXH128_isEqual(ha, hb)) {
		fprintf(stderr, "collide: no collision built\n");
		return 1;
	}
	if (write_file(argv[1], a, size) || write_file(argv[2], b, size))
		return 1;
	printf("%016llx%016llx\n", (unsigned long long)ha.high64, (unsigned long long)ha.low64);
	free(a);
	free(b);
	return 0;
}
