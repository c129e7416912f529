/* The lower object store: objects, name records, staging, publication.
 * Knows nothing of FUSE; every function returns 0 or -errno. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "record.h"
#include "stats.h"

#define KVT_MARKER "kvtierfs-store"
#define KVT_FORMAT_VERSION 1

struct kvt_store {
	int lowerfd;   /* LOWERDIR */
	int objfd;     /* LOWERDIR/objects */
	int namesfd;   /* LOWERDIR/names: the visible tree */
	int stagefd;   /* LOWERDIR/staging/<mount id>: this mount's */
	int lockfd;    /* OFD lock held for the mount's lifetime */
	char *mount_id;
	char *stage_path; /* "staging/<mount id>", relative to LOWERDIR */
	guint64 seq;    /* unique names inside staging and references */
	guint stale_removed; /* dead mounts' staging dirs removed at open */
	struct kvt_stats *stats; /* optional: objects, dedups, bytes stored */
};

/* Metadata given to a record file when it is installed. */
struct kvt_meta {
	mode_t mode;
	uid_t uid;
	gid_t gid;
	bool set_times;
	struct timespec atime, mtime;
};

/* Opens (or, when LOWERDIR is empty, creates) a store and this mount's
 * staging area; removes staging left by dead mounts.  On failure sets
 * @err to a one-line reason. */
struct kvt_store *kvt_store_open(const char *lowerdir, GError **err);
/* Removes this mount's staging area (nothing unpublished survives). */
void kvt_store_close(struct kvt_store *s);

/* A new empty staging file; *name_out is owned by the caller. */
int kvt_stage_create(struct kvt_store *s, int *fd_out, char **name_out);
void kvt_stage_discard(struct kvt_store *s, const char *name);

/* Turns a staged file into an object: hashes its first @size bytes and
 * links it under its hash, deduplicating against an existing object of the
 * same hash and size.  Fills rec->hash, rec->size and rec->ref.  The staged
 * file keeps its name (kvt_stage_discard it once a record names the
 * object, or kvt_object_release the object if none can). */
int kvt_object_publish(struct kvt_store *s, int stage_fd, const char *stage_name,
		       uint64_t size, struct kvt_record *rec);
/* The same, for a staged file whose hash the caller computed as it was
 * written (no second read of the bytes). */
int kvt_object_publish_hashed(struct kvt_store *s, const char *stage_name,
			      uint64_t size, const kvt_hash *hash,
			      struct kvt_record *rec);
/* Drops a record's reference to its object; the object goes with the last. */
int kvt_object_release(struct kvt_store *s, const struct kvt_record *rec);
int kvt_object_open(struct kvt_store *s, const struct kvt_record *rec, int flags);
int kvt_object_stat(struct kvt_store *s, const struct kvt_record *rec,
		    struct stat *st);
/* "objects/<2 hex>/<hash>.<ref>": the object a record uses. */
char *kvt_object_path(const struct kvt_record *rec);

/* Reads the record at @dirfd/@name; @st gets the record file's metadata.
 * -EBADMSG for a record that does not parse. */
int kvt_record_read(struct kvt_store *s, int dirfd, const char *name,
		    struct kvt_record *rec, struct stat *st);
/* Atomically puts @rec at @dirfd/@name.  If a record was replaced, it is
 * returned in @old (old->ref[0] != 0) for the caller to release. */
int kvt_record_install(struct kvt_store *s, int dirfd, const char *name,
		       const struct kvt_record *rec, const struct kvt_meta *meta,
		       struct kvt_record *old);
/* Atomically removes the record at @dirfd/@name and releases its object. */
int kvt_record_remove(struct kvt_store *s, int dirfd, const char *name);

/* Removes a torn object and the name that uses it.  The record at
 * @dirfd/@name goes if it still names @rec's reference (or does not parse:
 * then @rec is NULL); then @rec's reference and, when it is the same
 * file, the anchor, so that no later store dedups against torn bytes.
 * @name may be NULL (the object alone).  Returns 1 when it removed
 * something, 0 when another purge had already (nothing left to count). */
int kvt_store_purge(struct kvt_store *s, int dirfd, const char *name,
		    const struct kvt_record *rec);
