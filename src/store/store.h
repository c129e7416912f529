/* The store: the library that owns kvtierfs's lower directory and every
 * transaction on it.  It knows nothing of FUSE; every function returns
 * 0 (or a count) or -errno.
 *
 *   layout.h   where things are, the marker, the staging locks
 *   lower.h    the one door every lower path goes through
 *   stage.h    a version being written, in this mount's staging area
 *   object.h   content-addressed objects and their references
 *   name.h     name records: read, remove, rename, purge
 *   publish.h  the publication transaction and the fsync strategy
 *
 * A store opened here is one mount's: it has a staging directory of its
 * own, locked for as long as it is open. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "layout.h"
#include "record.h"
#include "stats.h"

struct kvt_store;

/* Opens (or, when LOWERDIR is empty, creates) a store, makes this mount's
 * staging area and removes staging left by dead mounts.  On failure sets
 * @err to a one-line reason. */
struct kvt_store *kvt_store_open(const char *lowerdir, GError **err);
/* Removes this mount's staging area (nothing unpublished survives). */
void kvt_store_close(struct kvt_store *s);

/* names/, the root of the visible tree (borrowed). */
struct kvt_dir *kvt_store_names(struct kvt_store *s);
/* Dead mounts' staging directories removed by kvt_store_open. */
guint kvt_store_stale_removed(struct kvt_store *s);
/* The lower file system refuses RENAME_EXCHANGE: names change under
 * holds (hold.h). */
bool kvt_store_no_exchange(struct kvt_store *s);
/* LOWERDIR's permission bits when this open made it 0700, else 0. */
mode_t kvt_store_root_closed_from(struct kvt_store *s);
/* The older format this open upgraded the store from (layout.h), or 0. */
int kvt_store_upgraded_from(struct kvt_store *s);
/* Whether another mount holds its staging lock now: 1 yes, 0 no, or
 * -errno.  The look stops at the first live one: each mount looks every
 * second, and on a network file system each lock looked at is a few
 * round trips, which for N hosts looking at all the others grew as N². */
int kvt_store_other_mount_live(struct kvt_store *s);
/* Counters the store moves (objects, dedups, bytes stored); may be NULL. */
void kvt_store_set_stats(struct kvt_store *s, struct kvt_stats *stats);
