/* Verified copies: memory files (memfd) that hold the bytes an open
 * hashed, served from there (verify.h).  A copy's pages are allocated
 * once and kept in a pool for the next open of the same size: a memory
 * file made, filled with zeros, mapped and unmapped for every open cost a
 * load more than the second read it spared.  Copies in use and in the
 * pool hold at most the budget: past it, an open waits for a copy to be
 * given back, and gets none after a while (counted and logged).  Pooled
 * copies go back to the system once idle.  Knows nothing of FUSE. */
#pragma once
#include <glib.h>
#include <stdint.h>
#include <sys/types.h>

#include "stats.h"

struct kvt_copy {
	int fd;          /* the memory file, at least @size bytes */
	void *map;       /* mapped, read-write */
	uint64_t size;   /* rounded up to a MiB */
	gint64 idle_since; /* pooled since (monotonic, us) */
};

struct kvt_copies;

/* A pool of at most @budget bytes; an open waits @wait_us at most for
 * room, @max_waiters at once and @max_user_waiters of one uid (the others
 * go without at once: a waiter holds a thread of the caller's, and one
 * user's opens must not take every place and leave another's open without
 * its copy), and a pooled copy is freed after @idle_us unused.  @stats
 * (or NULL) counts copy_waits and uncopied. */
struct kvt_copies *kvt_copies_new(uint64_t budget, gint64 wait_us, gint64 idle_us,
				  guint max_waiters, guint max_user_waiters,
				  struct kvt_stats *stats);
void kvt_copies_free(struct kvt_copies *c);
/* A copy of at least @size bytes for an open by @uid, or NULL when the
 * budget had no room within the wait (or @size is past it, or the system
 * has no memory). */
struct kvt_copy *kvt_copy_get(struct kvt_copies *c, uint64_t size, uid_t uid);
/* Back to the pool, or freed when the pool holds enough. */
void kvt_copy_put(struct kvt_copies *c, struct kvt_copy *cp);
/* Bytes of the copies in use and pooled, and of those pooled. */
void kvt_copies_held(struct kvt_copies *c, uint64_t *held, uint64_t *pooled);
