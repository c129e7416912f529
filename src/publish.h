/* The publication transaction: a staged version becomes an object and a
 * name (the steps, the crash analysis and the fsync strategy are at the
 * top of publish.c). */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "lower.h"
#include "name.h"
#include "record.h"
#include "stage.h"

struct kvt_store;

enum {
	/* The record replaced goes back to the caller (published.replaced)
	 * instead of being released: someone may still open its object. */
	KVT_PUBLISH_KEEP_REPLACED = 1 << 0,
	/* The object's bytes and the record's are durable before the record
	 * takes the name; kvt_store_sync_published() finishes the job after
	 * the caller's locks (publish.c: -o sync). */
	KVT_PUBLISH_SYNC = 1 << 1,
};

struct kvt_published {
	struct kvt_record rec;      /* what the name holds now, xattrs included */
	struct stat rec_st;         /* the record file */
	struct kvt_record replaced; /* KVT_PUBLISH_KEEP_REPLACED only */
	bool dedup;                 /* the bytes were stored already */
};

void kvt_published_clear(struct kvt_published *p);

/* Publishes the version @st under @d/@name with @meta and the client
 * xattrs @xattrs (may be NULL), as one transaction.  0: published, @out
 * filled, the staged file gone.  1: nothing to publish, the version is
 * being or was published by another call.  -errno: nothing changed on the
 * name, the version is open again with its bytes intact, and a later call
 * publishes it. */
int kvt_store_publish(struct kvt_store *s, struct kvt_stage *st, struct kvt_dir *d,
		      const char *name, const struct kvt_meta *meta, GHashTable *xattrs,
		      unsigned int flags, struct kvt_published *out);

/* Writes @rec (same object, new xattrs) and @meta at @d/@name, if the
 * record there is still @rec's version (kvt_name_rewrite), marked as a
 * move (reclaim.c).  -ESTALE if another mount replaced or removed it. */
int kvt_store_rewrite(struct kvt_store *s, struct kvt_dir *d, const char *name,
		      const struct kvt_record *rec, const struct kvt_meta *meta,
		      struct stat *rec_st);

/* After a publication with KVT_PUBLISH_SYNC of the object @rec at
 * @d/@name: makes the record, the object's links and the directories from
 * @d up to names/ durable.  When it returns, the publication survives a
 * power cut. */
int kvt_store_sync_published(struct kvt_store *s, struct kvt_dir *d, const char *name,
			     const struct kvt_record *rec);

/* Makes the published name @d/@name and its object @rec durable: what a
 * client's fsync of a published file asks for. */
int kvt_store_sync_name(struct kvt_store *s, struct kvt_dir *d, const char *name,
			const struct kvt_record *rec);

/* Makes every published name in @d durable, with its object (what a
 * client's fsync of a directory asks for after renames into it: the
 * entries, and with them the bytes that a temp file's fsync could not
 * make durable yet), and the directories from @d up to names/. */
int kvt_store_sync_dir(struct kvt_store *s, struct kvt_dir *d);
