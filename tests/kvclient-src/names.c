/*
 * kvclient: the names of blocks.  A key's path in the vLLM file layout and
 * in LMCache's flat one, and the directories a store creates for it.
 */
#include "kvclient.h"

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

void key_hash64(uint64_t key, char out[65])
{
	for (int i = 0; i < 4; i++)
		snprintf(out + 16 * i, 17, "%016" PRIx64,
			 mix64(key * 0xd1342543de82ef95ULL + (uint64_t)i * GOLDEN
			       + 0x5bd1e995));
}

/* <dir>/<model>_<12hex>_r0/<h[:3]>/<h[3:5]>_g0/<h>.bin */
void vllm_path(char *out, size_t n, uint64_t key)
{
	char h[65];

	key_hash64(key, h);
	snprintf(out, n, "%s/%s_%012" PRIx64 "_r0/%.3s/%.2s_g0/%s.bin", O.dir,
		 O.model, fnv1a(O.model) & (uint64_t)0xffffffffffff, h, h + 3, h);
}

void pt_name(char *out, size_t n, uint64_t key)
{
	snprintf(out, n, "kv-%016" PRIx64 ".pt", key);
}

void pt_path(char *out, size_t n, uint64_t key)
{
	char name[64];

	pt_name(name, sizeof(name), key);
	snprintf(out, n, "%s/%s", O.dir, name);
}

int ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);

	return a >= b && strcmp(s + a - b, suf) == 0;
}

int mkdir_parents(const char *path)
{
	char buf[PATH_MAX];
	char *p;

	snprintf(buf, sizeof(buf), "%s", path);
	p = strrchr(buf, '/');
	if (!p)
		return 0;
	*p = '\0';
	for (p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, 0755) < 0 && errno != EEXIST)
		return -1;
	return 0;
}
