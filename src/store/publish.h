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
	ino_t rec_ino;              /* the record file's inode number */
	struct stat rec_st;         /* the record file at the name (finish) */
	struct kvt_record replaced; /* KVT_PUBLISH_KEEP_REPLACED only */
	bool dedup;                 /* the bytes were stored already */
};

void kvt_published_clear(struct kvt_published *p);

/* A publication in three parts, so that a caller holds its locks for
 * the one step that changes the name (on a network file system each
 * lower step is a round trip, and a rename holds the tree lock):
 *   kvt_publication_prepare  the version sealed, its object made and its
 *                            record written to staging (steps 1-2 of
 *                            publish.c, and the record of step 3);
 *   kvt_publication_install  the record takes the name (step 3);
 *   kvt_publication_finish   step 4, once the name holds the record;
 *   kvt_publication_abort    undoes the preparation, if the install
 *                            failed or was not tried.
 * Until installed, the name is untouched and the version sealed: no
 * write lands in it, and another call to publish it gets 1. */
struct kvt_publication {
	struct kvt_stage *st;
	struct kvt_record rec;      /* the new record, xattrs included */
	struct kvt_meta meta;       /* the record's */
	GHashTable *xattrs;         /* the ones asked for (NULL: none) */
	char *record;               /* the record staged, until installed */
	ino_t record_ino;           /* its inode number */
	bool record_left;           /* installed, and still named in staging */
	uint64_t size;
	bool dedup, sync;
};

/* 0: prepared; 1: nothing to publish (another call is publishing the
 * version or did); -errno: nothing prepared, the version open again. */
int kvt_publication_prepare(struct kvt_store *s, struct kvt_stage *st,
			    const struct kvt_meta *meta, GHashTable *xattrs,
			    unsigned int flags, struct kvt_publication *p);
/* Whether @p was prepared with @meta and @xattrs: a record written
 * before a chmod of the file no longer says what it is. */
bool kvt_publication_matches(const struct kvt_publication *p, const struct kvt_meta *meta,
			     GHashTable *xattrs);
/* Puts the prepared record at @d/@name.  0: published, @out filled, the
 * record it replaced (if any) in out->replaced; out->rec_ino says the
 * record file (what the name shows of it, out->rec_st, is looked at by
 * kvt_publication_finish).  -errno: nothing changed on the name, @p still
 * prepared. */
int kvt_publication_install(struct kvt_store *s, struct kvt_publication *p,
			    struct kvt_dir *d, const char *name, struct kvt_published *out);
/* After the install: the staged file goes, the object gets its anchor,
 * and unless @keep_replaced the replaced record's object goes.  Then
 * out->rec_st gets the record file as it is at @d/@name, or st_ino 0 if
 * another record is there now. */
void kvt_publication_finish(struct kvt_store *s, struct kvt_publication *p,
			    struct kvt_dir *d, const char *name, struct kvt_published *out,
			    bool keep_replaced);
void kvt_publication_abort(struct kvt_store *s, struct kvt_publication *p);

/* Publishes the version @st under @d/@name with @meta and the client
 * xattrs @xattrs (may be NULL), as one transaction (the three parts
 * above in a row).  0: published, @out
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

/* Which names of a directory a sync makes durable with their bytes: the
 * record @rec read from the name and @st, the name's metadata (as shown:
 * kvt_record_show). */
typedef bool (*kvt_sync_wanted)(const struct kvt_record *rec, const struct stat *st,
				void *data);

/* Makes every published name in @d that @wanted wants (NULL: all)
 * durable, with its object (what a client's fsync of a directory asks for
 * after renames into it: the entries, and with them the bytes that a temp
 * file's fsync could not make durable yet), and the directories from @d
 * up to names/, with every entry in them. */
int kvt_store_sync_dir(struct kvt_store *s, struct kvt_dir *d, kvt_sync_wanted wanted,
		       void *data);
