/* What the unit tests share: TAP output, paths on the lower directory,
 * and publishing bytes under a name through the store's one publication
 * call, as the daemon does. */
#pragma once
#include <errno.h>
#include <glib.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "name.h"
#include "object.h"
#include "publish.h"
#include "stage.h"
#include "store.h"

static int n_test;
static int n_fail;

static inline void ok(bool cond, const char *desc)
{
	n_test++;
	if (!cond)
		n_fail++;
	printf("%sok %d - %s\n", cond ? "" : "not ", n_test, desc);
}

/* Entries of the directory @top/@rel. */
static inline int count_in(const char *top, const char *rel)
{
	g_autofree char *path = g_build_filename(top, rel, NULL);
	g_autoptr(GDir) d = g_dir_open(path, 0, NULL);
	int n = 0;

	while (d && g_dir_read_name(d))
		n++;
	return n;
}

/* Files under @top/objects/, all fan-out directories together. */
static inline int count_objects(const char *top)
{
	g_autofree char *path = g_build_filename(top, "objects", NULL);
	g_autoptr(GDir) d = g_dir_open(path, 0, NULL);
	const char *e;
	int n = 0;

	while (d && (e = g_dir_read_name(d))) {
		g_autofree char *rel = g_build_filename("objects", e, NULL);

		n += count_in(top, rel);
	}
	return n;
}

/* The directory of names/@path (held), and its last component in
 * *@leaf; NULL when the directory cannot be opened. */
static inline struct kvt_dir *names_dir(struct kvt_store *s, const char *path,
					const char **leaf)
{
	const char *slash = strrchr(path, '/');
	g_autofree char *dir = slash ? g_strndup(path, slash - path) : NULL;
	struct kvt_dir *d = NULL;

	*leaf = slash ? slash + 1 : path;
	if (!dir)
		return kvt_dir_ref(kvt_store_names(s));
	return kvt_dir_open(kvt_store_names(s), dir, &d) == 0 ? d : NULL;
}

/* Stages @len bytes of @fill and publishes them at names/@name; a record
 * it replaced is released.  @rec (may be NULL) gets the new record. */
static inline int store_bytes(struct kvt_store *s, const char *name, char fill,
			      size_t len, struct kvt_record *rec)
{
	g_autofree char *buf = g_malloc(len ? len : 1);
	struct kvt_meta meta = { .mode = 0644 };
	struct kvt_published pub;
	struct kvt_stage *st;
	const char *leaf;
	g_autoptr(kvt_dir) d = names_dir(s, name, &leaf);
	int ret;

	if (!d)
		return -ENOENT;
	memset(buf, fill, len);
	ret = kvt_stage_new(s, &st);
	if (ret < 0)
		return ret;
	ret = kvt_stage_write(st, buf, len, 0);
	if (ret == 0)
		ret = kvt_store_publish(s, st, d, leaf, &meta, NULL, 0, &pub);
	kvt_stage_unref(st);
	if (ret == 0 && rec) {
		*rec = pub.rec;
		kvt_record_init(&pub.rec);
	}
	if (ret == 0)
		kvt_published_clear(&pub);
	return ret;
}

/* @top/@rel, a path on the lower directory. */
static inline char *lower_path(const char *top, const char *rel)
{
	return g_build_filename(top, rel, NULL);
}

/* The path of @rec's object (@anchor: of its anchor) under @top. */
static inline char *object_file(const char *top, const struct kvt_record *rec, bool anchor)
{
	g_autofree char *name = anchor ? kvt_object_anchor_name(&rec->hash)
				       : kvt_object_ref_name(rec);
	char fan[3];

	kvt_object_fanout(&rec->hash, fan);
	return g_build_filename(top, "objects", fan, name, NULL);
}

static inline bool lower_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}
