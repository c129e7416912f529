/* A version being written: its bytes in a file of this mount's staging
 * area, and the XXH3-128 of them, computed as they arrive in order so that
 * publication does not read them again.  Block-aligned writes go to the
 * staging file with O_DIRECT: the bytes are not copied into the lower page
 * cache, which a KV-cache block written once has no use for.
 *
 * A stage is OPEN while it takes writes, SEALED while one publication
 * (publish.h) turns it into an object and a name, and PUBLISHED after;
 * a failed publication opens it again, bytes intact. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "hash.h"

struct kvt_store;

enum kvt_stage_state {
	KVT_STAGE_OPEN,
	KVT_STAGE_SEALED,
	KVT_STAGE_PUBLISHED,
};

struct kvt_stage {
	gint refs;
	struct kvt_store *store;
	int fd;              /* the staging file */
	int dfd;             /* the same, O_DIRECT; -1 where not supported */
	char *name;          /* in this mount's staging directory */
	/* The file the version's record will be, made with the stage so that
	 * its inode number, which the visible file shows, is known from the
	 * create on and stays the same once published.  Kept open for the
	 * publication to write (no call more per store than a record made
	 * then).  Closed, and NULL, once a publication installed it. */
	char *record;
	int record_fd;
	struct stat record_st; /* as made (owner and mode) */
	bool record_dirty;     /* a failed publication wrote to it */
	GRWLock io;          /* writes: reader side; sealing: writer side */
	uint64_t size;       /* atomic: highest byte written + 1 */
	int error;           /* first write error: publication fails with it */
	int state;           /* atomic: enum kvt_stage_state */
	bool durable;        /* atomic: synced since the last change */
	bool orphan;         /* atomic: a close failed to publish it, and no
			      * write came since: nobody's close will */

	GMutex hash_lock;
	GCond hash_cond;
	kvt_hash_stream *hs; /* bytes [0, hashed) in order; NULL once broken */
	uint64_t hashed;

	/* Called with the last reference, once its files are closed: whoever
	 * counted the stage gives it back (the daemon's bound on files being
	 * written per user).  NULL: nobody. */
	void (*gone)(void *data);
	void *gone_data;
};

/* A new, empty stage in @store's staging area, with the empty file its
 * record will be (st->record), root's and 0600 as every record file. */
int kvt_stage_new(struct kvt_store *store, struct kvt_stage **out);
/* Frees the O_DIRECT buffers kept for the next writes (at exit). */
void kvt_stage_cleanup(void);
struct kvt_stage *kvt_stage_ref(struct kvt_stage *st);
/* The staging file goes with the last reference unless it was published. */
void kvt_stage_unref(struct kvt_stage *st);

static inline enum kvt_stage_state kvt_stage_state(struct kvt_stage *st)
{
	return (enum kvt_stage_state)__atomic_load_n(&st->state, __ATOMIC_ACQUIRE);
}

/* The first write error of the version (positive errno), 0 if none: such
 * a version has a hole and is never published, nor read. */
static inline int kvt_stage_error(struct kvt_stage *st)
{
	return __atomic_load_n(&st->error, __ATOMIC_RELAXED);
}

static inline uint64_t kvt_stage_size(struct kvt_stage *st)
{
	return __atomic_load_n(&st->size, __ATOMIC_RELAXED);
}

/* Writes all of @buf at @off (caller holds st->io as reader and saw the
 * stage OPEN).  A failed write sticks to the stage: that version can never
 * be published. */
int kvt_stage_write(struct kvt_stage *st, const char *buf, size_t size, off_t off);
ssize_t kvt_stage_read(struct kvt_stage *st, char *buf, size_t size, off_t off);
int kvt_stage_truncate(struct kvt_stage *st, uint64_t size);
/* Copies the first @len bytes of @src_fd into the (empty) stage. */
int kvt_stage_fill(struct kvt_stage *st, int src_fd, uint64_t len);

/* Makes the running hash cover every byte written, reading the file again
 * if writes came out of order: the slow part of a publication, for callers
 * that want it done before they take their locks.  Later writes in order
 * keep it whole. */
int kvt_stage_prepare(struct kvt_stage *st);
/* Makes the bytes written so far durable (fdatasync), for a publication
 * that must be: the other slow part, done before the locks too.  A later
 * change makes the stage not durable again (kvt_stage_durable). */
int kvt_stage_sync(struct kvt_stage *st);

static inline bool kvt_stage_durable(struct kvt_stage *st)
{
	return __atomic_load_n(&st->durable, __ATOMIC_ACQUIRE);
}

/* For the publication: OPEN -> SEALED, with the hash and size of the
 * bytes (1 when the stage is not OPEN: another publication has it). */
int kvt_stage_seal(struct kvt_stage *st, kvt_hash *hash, uint64_t *size);
/* SEALED -> OPEN (the publication failed) or -> PUBLISHED. */
void kvt_stage_unseal(struct kvt_stage *st);
/* The record file is installed: it is no more the stage's. */
void kvt_stage_set_published(struct kvt_stage *st);
