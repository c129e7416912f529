/* Verified copies: memory files (memfd) that hold the bytes an open
 * hashed, served from there (verify.h).  A copy's pages are allocated
 * once and kept in a pool for the next open of the same size: a memory
 * file made, filled with zeros, mapped and unmapped for every open cost a
 * load more than the second read it spared.  Copies in use and in the
 * pool hold at most the budget; past it, an open gets no copy.  Knows
 * nothing of FUSE. */
#pragma once
#include <glib.h>
#include <stdint.h>

struct kvt_copy {
	int fd;         /* the memory file, at least @size bytes */
	void *map;      /* mapped, read-write */
	uint64_t size;  /* rounded up to a MiB */
};

struct kvt_copies;

struct kvt_copies *kvt_copies_new(uint64_t budget);
void kvt_copies_free(struct kvt_copies *c);
/* A copy of at least @size bytes, or NULL when the budget (or the
 * system) has no room. */
struct kvt_copy *kvt_copy_get(struct kvt_copies *c, uint64_t size);
/* Back to the pool, or freed when the pool holds enough. */
void kvt_copy_put(struct kvt_copies *c, struct kvt_copy *cp);
