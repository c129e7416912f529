/* What the unit tests share: TAP output, and publishing bytes under a name
 * through the store API the way the daemon does. */
#pragma once
#include <errno.h>
#include <glib.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../src/store.h"

static int n_test;
static int n_fail;

static inline void ok(bool cond, const char *desc)
{
	n_test++;
	if (!cond)
		n_fail++;
	printf("%sok %d - %s\n", cond ? "" : "not ", n_test, desc);
}

/* Stages @len bytes of @fill and publishes them at names/@name; a record
 * it replaced is released.  @rec (may be NULL) gets the new record. */
static inline int store_bytes(struct kvt_store *s, const char *name, char fill,
			      size_t len, struct kvt_record *rec)
{
	g_autofree char *buf = g_malloc(len);
	g_autofree char *stage = NULL;
	struct kvt_meta meta = { .mode = 0644 };
	struct kvt_record old, own;
	int fd, ret;

	if (!rec)
		rec = &own;
	memset(buf, fill, len);
	ret = kvt_stage_create(s, &fd, &stage);
	if (ret < 0)
		return ret;
	if (write(fd, buf, len) != (ssize_t)len) {
		close(fd);
		return -EIO;
	}
	kvt_record_init(rec);
	ret = kvt_object_publish(s, fd, stage, len, rec);
	close(fd);
	if (ret < 0)
		return ret;
	kvt_stage_discard(s, stage);
	ret = kvt_record_install(s, s->namesfd, name, rec, &meta, &old);
	if (ret == 0 && old.ref[0])
		kvt_object_release(s, &old);
	kvt_record_clear(&old);
	if (rec == &own)
		kvt_record_clear(&own);
	return ret;
}
