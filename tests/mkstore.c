/* mkstore: fills a kvtierfs store with N small named objects through the
 * store API, as fast as the lower disk allows, for the large-store tests.
 *
 *     mkstore LOWERDIR N
 *
 * Names: <3 hex>/<16 hex>.bin, 4096 directories; object i holds 64 bytes
 * derived from i, so that every object is distinct.  Prints the time
 * taken.  Exit 0 on success, 1 on error, 2 on usage. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/store.h"

int main(int argc, char **argv)
{
	g_autoptr(GError) err = NULL;
	struct kvt_meta meta = { .mode = 0644 };
	struct kvt_store *s;
	gint64 t0 = g_get_monotonic_time();
	char *end;
	uint64_t n;

	if (argc != 3 || !(n = strtoull(argv[2], &end, 10)) || *end) {
		fprintf(stderr, "usage: mkstore LOWERDIR N\n");
		return 2;
	}
	s = kvt_store_open(argv[1], &err);
	if (!s) {
		fprintf(stderr, "mkstore: %s\n", err->message);
		return 1;
	}
	for (unsigned d = 0; d < 4096; d++) {
		char dir[8];

		snprintf(dir, sizeof(dir), "%03x", d);
		if (mkdirat(s->namesfd, dir, 0755) && errno != EEXIST) {
			perror("mkstore: mkdir");
			return 1;
		}
	}
	for (uint64_t i = 0; i < n; i++) {
		g_autofree char *stage = NULL;
		struct kvt_record rec, old;
		uint64_t buf[8];
		char name[32];
		int fd, ret;

		for (int w = 0; w < 8; w++)
			buf[w] = (i + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)w << 56;
		snprintf(name, sizeof(name), "%03x/%016" PRIx64 ".bin",
			 (unsigned)(buf[0] >> 52), i);
		ret = kvt_stage_create(s, &fd, &stage);
		if (ret == 0 && write(fd, buf, sizeof(buf)) != sizeof(buf))
			ret = -EIO;
		kvt_record_init(&rec);
		if (ret == 0)
			ret = kvt_object_publish(s, fd, stage, sizeof(buf), &rec);
		if (fd >= 0)
			close(fd);
		if (ret == 0)
			ret = kvt_record_install(s, s->namesfd, name, &rec, &meta, &old);
		kvt_record_clear(&rec);
		if (ret < 0) {
			fprintf(stderr, "mkstore: %s: %s\n", name, g_strerror(-ret));
			return 1;
		}
		kvt_record_clear(&old);
	}
	kvt_store_close(s);
	printf("mkstore: %" PRIu64 " names in %.1f s\n", n,
	       (g_get_monotonic_time() - t0) / 1e6);
	return 0;
}
