/* The evictor: keeps the tier under its budget (usage.h) by removing the
 * names used least, in the order of an eviction policy (evict.h), in a
 * thread of its own: never on the path of a lookup or a load.
 *
 * A block is known by its record file's inode number (its key): a
 * publication makes a new record file, a rename keeps it, and an open
 * knows it without a lower call.  Uses are stores (a publication) and
 * loads (an open for reading); a lookup, a stat or the evictor's own walk
 * are not.  An open pins its block until its release: a pinned block is
 * never chosen, and the caller's evict_name checks the pin again under
 * its own locks.
 *
 * Recency survives a remount and a kill -9 in the record files' atimes,
 * which a load sets (at most every few seconds a name, file.c) and
 * nothing else moves (records are read with O_NOATIME).  When the store
 * opens, a walk of names/ in the background reads each record's atime
 * and size and fills the index, oldest first; until it ends nothing is
 * evicted, and a store past the budget waits for it (30 s at most),
 * then gets ENOSPC.  A walk is also made again when a pass finds nothing to evict
 * while the tier is over its budget and the last walk is older than ten
 * times what it took (1 s at least, KVT_EVICT_REWALK_S at most): names
 * stored by other mounts, or renamed with their directory, are then
 * known again.
 *
 * A pass starts when a store takes the usage past high_pct of the budget
 * (or the thread's tick finds it there), or a store waits for room
 * (kvt_evictor_make_room), and evicts what was over low_pct when it
 * started: the stores that come meanwhile are the next pass's.  Its
 * victims go EVICT_THREADS at a time, each a dozen lower calls, and a
 * store that waits takes the room of the first one gone.  Its cost grows
 * with the blocks it evicts (and the pinned ones it passes), not with the
 * blocks held.  One log line a pass.
 *
 * Ghosts (evict.h) know a block by the hash of its path: stored again
 * after its eviction, it has a new record file, and so a new key.
 *
 * Several mounts of one store (other hosts): one of them makes the passes
 * past high_pct, the one that holds the evictor's lock on the marker
 * (layout.h), as one reclaims orphans; the first one whose index is built
 * takes it; the others make room for their own stores only, and one of
 * them takes over when it is gone.  A mount sees
 * the others' stores in its usage within a second (ledger.h), and their
 * names in its index at its next walk (when it finds nothing to evict).
 * A load on another host sets the record's atime: a
 * block chosen to go whose atime is later than its last use known here
 * stays, as used (one stat a block chosen, which evict_name makes
 * anyway).
 *
 * Memory: the index's (evict.h, 90-180 bytes a block) plus, per block,
 * its path below names/ and 32 bytes (the entry, the table's slot and
 * malloc's header): about 280 bytes for vLLM's 100-byte paths
 * (KVT_EVICTOR_BYTES_PER_BLOCK is the bound tests hold it to, for such
 * paths).  Knows nothing of FUSE. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "evict.h"

struct kvt_store;
struct kvt_dir;

#define KVT_EVICT_REWALK_S 60
#define KVT_EVICT_REMOTE_USE_US G_USEC_PER_SEC
#define KVT_EVICTOR_BYTES_PER_BLOCK 400

/* Removes the name @path (below names/) if it still holds the record
 * file @key, nothing has it open and its atime is not later than
 * @used_at (unix microseconds: its last use this mount knows of) by more
 * than KVT_EVICT_REMOTE_USE_US (this mount's own load sets the atime a
 * moment after it tells the evictor): 0 once
 * removed; -EBUSY when it is in use, -EAGAIN when its atime says it was
 * used since (a load on another host): it stays, as used; -ENOENT or
 * -ESTALE when the name is gone or holds another record (the block is
 * forgotten); another -errno for a lower error (it stays). */
typedef int (*kvt_evict_name_fn)(void *data, const char *path, uint64_t key, gint64 used_at);

struct kvt_evictor_opts {
	enum kvt_evict_policy policy;
	unsigned high_pct;       /* of the budget: a pass starts above it */
	unsigned low_pct;        /* ... and ends under it */
	kvt_evict_name_fn evict_name;
	void *data;
};

/* Starts the walk and the thread; nothing while the store has no
 * budget (usage.h: start it first). */
void kvt_evictor_start(struct kvt_store *s, const struct kvt_evictor_opts *o);
/* Stops and frees it (a pass in progress ends after its current name). */
void kvt_evictor_stop(struct kvt_store *s);

/* A publication of @d/@name, record file @key, @size bytes: a use. */
void kvt_evictor_stored(struct kvt_store *s, struct kvt_dir *d, const char *name, uint64_t key,
			uint64_t size);
/* @key's name is now @d/@name (a rename). */
void kvt_evictor_moved(struct kvt_store *s, uint64_t key, struct kvt_dir *d, const char *name);
/* An open of @key: pinned until kvt_evictor_unpin; @load: a use. */
void kvt_evictor_pin(struct kvt_store *s, uint64_t key, bool load);
void kvt_evictor_unpin(struct kvt_store *s, uint64_t key);
bool kvt_evictor_pinned(struct kvt_store *s, uint64_t key);
/* @key's name went (an unlink, a purge). */
void kvt_evictor_forget(struct kvt_store *s, uint64_t key);

/* For usage.c: a store needs @size bytes more than the budget leaves.
 * Wakes a pass and waits for it (a few seconds at most); false when
 * nothing could be evicted (all pinned, the index not built yet, no
 * evictor). */
bool kvt_evictor_make_room(struct kvt_store *s, uint64_t size);

struct kvt_evictor_info {
	bool indexed;            /* the walk at the open ended */
	bool passing;            /* a pass is evicting now */
	bool leads;              /* this mount makes the passes past
				  * high_pct (others mount the store) */
	uint64_t blocks, bytes;  /* in the index */
	uint64_t pinned_bytes;
	const char *policy;
	unsigned high_pct, low_pct; /* the watermarks */
};
/* False when there is no evictor. */
bool kvt_evictor_info(struct kvt_store *s, struct kvt_evictor_info *out);
