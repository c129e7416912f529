/* libFuzzer target: the store marker (LOWERDIR/kvtierfs-store), through
 * kvt_marker_parse(), the function the daemon's and fsck's layout_open()
 * read it with.  What it accepts is exactly the marker create_store()
 * writes for that version, with or without its newline; everything else
 * is -EBADMSG and leaves the version alone. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"

#define expect(cond)                                                        \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "fuzz-marker: %s:%d: expected %s\n", \
				__FILE__, __LINE__, #cond);                 \
			abort();                                            \
		}                                                           \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Its own copy: the parser must not read a byte past @size. */
	char *buf = malloc(size ? size : 1);
	char want[64];
	int version = -12345, ret, n;

	memcpy(buf, data, size);
	ret = kvt_marker_parse(buf, size, &version);
	if (ret) {
		expect(ret == -EBADMSG);
		expect(version == -12345);
	} else {
		expect(version >= 0);
		n = snprintf(want, sizeof(want), KVT_MARKER " %d\n", version);
		expect(size == (size_t)n || size == (size_t)n - 1);
		expect(!memcmp(buf, want, size));
	}
	free(buf);
	return 0;
}
