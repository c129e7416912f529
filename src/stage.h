/* A version being written: its bytes in a staging file, and the hash of
 * them, computed as they arrive in order so that publication does not read
 * them again.  Block-aligned writes go to the staging file with O_DIRECT:
 * the bytes are not copied into the lower page cache, which a KV-cache
 * block written once has no use for. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "hash.h"
#include "store.h"

struct kvt_stage {
	gint refs;
	int fd;              /* the staging file */
	int dfd;             /* the same, O_DIRECT; -1 where not supported */
	char *name;          /* in this mount's staging directory */
	GRWLock io;          /* writes: reader side; publication: writer side */
	uint64_t size;       /* atomic: highest byte written + 1 */
	int error;           /* first write error: publication fails with it */
	bool consumed;

	GMutex hash_lock;
	GCond hash_cond;
	kvt_hash_stream *hs; /* bytes [0, hashed) in order; NULL once broken */
	uint64_t hashed;
};

/* A new, empty stage in @store's staging area. */
int kvt_stage_create_new(struct kvt_store *store, struct kvt_stage **out);
struct kvt_stage *kvt_stage_ref(struct kvt_stage *st);
/* The staging file goes with the last reference unless it was consumed. */
void kvt_stage_put(struct kvt_store *store, struct kvt_stage *st);

/* Writes all of @buf at @off (caller holds st->io as reader).  A failed
 * write sticks to the stage: that version can never be published. */
int kvt_stage_write(struct kvt_stage *st, const char *buf, size_t size, off_t off);
ssize_t kvt_stage_read(struct kvt_stage *st, char *buf, size_t size, off_t off);
int kvt_stage_truncate(struct kvt_stage *st, uint64_t size);
/* Copies the first @len bytes of @src_fd into the (empty) stage. */
int kvt_stage_fill(struct kvt_stage *st, int src_fd, uint64_t len);

/* The hash of the stage's @size bytes if they were all hashed as they
 * were written (caller holds st->io as writer). */
bool kvt_stage_hash(struct kvt_stage *st, uint64_t size, kvt_hash *out);
