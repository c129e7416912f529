/* libFuzzer target: name records (src/store/record.h).
 *
 * Whatever kvt_record_parse() accepts must encode and parse back equal,
 * and encode again to the same bytes; whatever it refuses is -EBADMSG with
 * the record left empty.  A record's check line would stop the fuzzer at
 * its first byte, so each input is also parsed with a valid check line
 * appended (after a newline, if it lacks one): that lets the fuzzer reach
 * the line parser behind it. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <xxh_x86dispatch.h>

#include "record.h"

#define expect(cond)                                                        \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "fuzz-record: %s:%d: expected %s\n", \
				__FILE__, __LINE__, #cond);                 \
			abort();                                            \
		}                                                           \
	} while (0)

static bool records_equal(const struct kvt_record *a, const struct kvt_record *b)
{
	return kvt_hash_equal(&a->hash, &b->hash) && a->size == b->size &&
	       !strcmp(a->ref, b->ref) && kvt_xattrs_equal(a->xattrs, b->xattrs);
}

static bool is_empty(const struct kvt_record *r)
{
	static const struct kvt_record empty;

	return !memcmp(r, &empty, sizeof(*r));
}

static void one(const char *buf, size_t len)
{
	struct kvt_record r, back;
	GString *enc, *again;
	int ret = kvt_record_parse(buf, len, &r);

	if (ret) {
		expect(ret == -EBADMSG);
		expect(is_empty(&r));
		return;
	}
	/* A file's ref is what the daemon will use as a file name
	 * component; a link or a special file has none. */
	if (r.kind == KVT_KIND_FILE)
		expect(r.ref[0] && strlen(r.ref) < KVT_REF_MAX && !strchr(r.ref, '/'));
	else
		expect(!r.ref[0]);

	enc = kvt_record_encode(&r);
	/* Each line encodes to no more bytes than it was parsed from. */
	expect(enc->len <= len);
	ret = kvt_record_parse(enc->str, enc->len, &back);
	expect(ret == 0);
	expect(records_equal(&r, &back));
	again = kvt_record_encode(&back);
	expect(again->len == enc->len && !memcmp(again->str, enc->str, enc->len));

	/* A copy is equal too, and clears cleanly. */
	kvt_record_copy(&back, &r);
	expect(records_equal(&r, &back));

	g_string_free(again, TRUE);
	g_string_free(enc, TRUE);
	kvt_record_clear(&back);
	kvt_record_clear(&r);
	expect(is_empty(&r));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	GString *fixed;

	if (size > KVT_RECORD_MAX)
		return 0;
	one((const char *)data, size);

	fixed = g_string_new_len((const char *)data, size);
	if (!size || data[size - 1] != '\n')
		g_string_append_c(fixed, '\n');
	g_string_append_printf(fixed, "check %016" G_GINT64_MODIFIER "x\n",
			       (guint64)XXH3_64bits_dispatch(fixed->str, fixed->len));
	one(fixed->str, fixed->len);
	g_string_free(fixed, TRUE);
	return 0;
}
