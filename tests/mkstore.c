/* mkstore: large stores for the tests.
 *
 *     mkstore fill LOWERDIR N         N small named objects, through the
 *                                     store API (no mount)
 *     mkstore lookup DIR N COUNT      access(F_OK) COUNT of those names
 *                                     under DIR (a mount of the store),
 *                                     spread over the store, each once
 *                                     while COUNT <= N; each must exist
 *     mkstore format1 LOWERDIR        makes a store (not mounted) one of
 *                                     format 1, as an older kvtierfs left
 *                                     it: each record file without its
 *                                     owner and mode lines, chowned and
 *                                     chmodded to them instead
 *
 * Names: <3 hex>/<16 hex>.bin, 4096 directories; object i holds 64 bytes
 * derived from i, so that every object is distinct.  Prints the time
 * taken and, for lookup, the rate.  Exit 0 on success, 1 on error, 2 on
 * usage. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layout.h"
#include "name.h"
#include "publish.h"
#include "stage.h"
#include "store.h"

static void content(uint64_t i, uint64_t buf[8], char name[32])
{
	for (int w = 0; w < 8; w++)
		buf[w] = (i + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)w << 56;
	snprintf(name, 32, "%03x/%016" PRIx64 ".bin", (unsigned)(buf[0] >> 52), i);
}

static int lookup(const char *dir, uint64_t n, uint64_t count)
{
	gint64 t0 = g_get_monotonic_time();
	double secs;

	for (uint64_t k = 0; k < count; k++) {
		/* A prime stride visits distinct names, spread over the
		 * directories (n is not a multiple of it in the tests). */
		uint64_t buf[8], i = (k * 7919 + 13) % n;
		char name[32], path[PATH_MAX];

		content(i, buf, name);
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		if (access(path, F_OK)) {
			fprintf(stderr, "mkstore: %s: %s\n", path, g_strerror(errno));
			return 1;
		}
	}
	secs = (g_get_monotonic_time() - t0) / 1e6;
	printf("mkstore lookup: %" PRIu64 " of %" PRIu64 " names in %.3f s: %.0f ops/s\n",
	       count, n, secs, count / secs);
	return 0;
}

/* nftw: a record of format 2 at @path made one of format 1. */
static int to_format1(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	g_autofree char *buf = NULL;
	g_autoptr(GString) enc = NULL;
	struct kvt_record r;
	gsize len;

	(void)ftw;
	if (type != FTW_F)
		return 0;
	if (!g_file_get_contents(path, &buf, &len, NULL) || kvt_record_parse(buf, len, &r) < 0) {
		fprintf(stderr, "mkstore: %s: not a record\n", path);
		return 1;
	}
	if (r.has_meta) {
		r.has_meta = false;
		enc = kvt_record_encode(&r);
		if (!g_file_set_contents(path, enc->str, enc->len, NULL) ||
		    chown(path, r.uid, r.gid) || chmod(path, r.mode)) {
			fprintf(stderr, "mkstore: %s: cannot rewrite\n", path);
			kvt_record_clear(&r);
			return 1;
		}
	}
	kvt_record_clear(&r);
	(void)st;
	return 0;
}

static int format1(const char *lowerdir)
{
	g_autofree char *names = g_build_filename(lowerdir, "names", NULL);
	g_autofree char *marker = g_build_filename(lowerdir, KVT_MARKER, NULL);

	if (nftw(names, to_format1, 16, FTW_PHYS) ||
	    !g_file_set_contents(marker, KVT_MARKER " 1\n", -1, NULL)) {
		fprintf(stderr, "mkstore: %s: cannot make it format 1\n", lowerdir);
		return 1;
	}
	return 0;
}

static bool number(const char *s, uint64_t *out)
{
	char *end;

	*out = strtoull(s, &end, 10);
	return *s && !*end && *out > 0;
}

int main(int argc, char **argv)
{
	g_autoptr(GError) err = NULL;
	struct kvt_meta meta = { .mode = 0644 };
	struct kvt_store *s;
	gint64 t0 = g_get_monotonic_time();
	uint64_t n, count;

	if (argc == 5 && !strcmp(argv[1], "lookup") && number(argv[3], &n) &&
	    number(argv[4], &count))
		return lookup(argv[2], n, count);
	if (argc == 3 && !strcmp(argv[1], "format1"))
		return format1(argv[2]);
	if (argc != 4 || strcmp(argv[1], "fill") || !number(argv[3], &n)) {
		fprintf(stderr, "usage: mkstore fill LOWERDIR N | mkstore lookup DIR N COUNT | "
			"mkstore format1 LOWERDIR\n");
		return 2;
	}
	/* Root's alone, as a mount wants it (layout.h). */
	if (mkdir(argv[2], 0700) && errno != EEXIST) {
		fprintf(stderr, "mkstore: %s: %s\n", argv[2], g_strerror(errno));
		return 1;
	}
	s = kvt_store_open(argv[2], &err);
	if (!s) {
		fprintf(stderr, "mkstore: %s\n", err->message);
		return 1;
	}
	for (unsigned d = 0; d < 4096; d++) {
		char dir[8];
		int ret;

		snprintf(dir, sizeof(dir), "%03x", d);
		ret = kvt_dir_mkdir(kvt_store_names(s), dir, 0755);
		if (ret < 0 && ret != -EEXIST) {
			fprintf(stderr, "mkstore: mkdir: %s\n", g_strerror(-ret));
			return 1;
		}
	}
	for (uint64_t i = 0; i < n; i++) {
		g_autoptr(kvt_dir) d = NULL;
		struct kvt_published pub;
		struct kvt_stage *st = NULL;
		uint64_t buf[8];
		char name[32];
		int ret;

		content(i, buf, name);
		name[3] = '\0'; /* "<3 hex>" and "<16 hex>.bin" */
		ret = kvt_dir_open(kvt_store_names(s), name, &d);
		if (ret == 0)
			ret = kvt_stage_new(s, &st);
		if (ret == 0)
			ret = kvt_stage_write(st, (const char *)buf, sizeof(buf), 0);
		if (ret == 0)
			ret = kvt_store_publish(s, st, d, name + 4, &meta, NULL, 0, &pub);
		kvt_stage_unref(st);
		if (ret < 0) {
			name[3] = '/';
			fprintf(stderr, "mkstore: %s: %s\n", name, g_strerror(-ret));
			return 1;
		}
		kvt_published_clear(&pub);
	}
	kvt_store_close(s);
	printf("mkstore: %" PRIu64 " names in %.1f s\n", n,
	       (g_get_monotonic_time() - t0) / 1e6);
	return 0;
}
