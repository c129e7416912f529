/* Which blocks go first when the tier is over its budget: an index of
 * blocks by a 64-bit key (to the evictor, the inode of the block's
 * record), each with its size in bytes and a 64-bit name (a hash of its
 * path) that its ghost is known by, kept in the order of an eviction
 * policy.  It knows nothing of files: the caller tells it of stores
 * (insert), loads (touch), removals done elsewhere (remove) and blocks
 * that must stay (pin), and asks it for victims.
 *
 * Four policies:
 *
 * - KVT_EVICT_S3FIFO (Yang et al., "FIFO queues are all you need for cache
 *   eviction", SOSP 2023).  A new block goes to a small FIFO (10% of the
 *   bytes); one loaded again before it leaves the small FIFO moves to the
 *   main FIFO, the others leave and their keys go to a ghost FIFO; a block
 *   stored again while its key is in the ghost goes straight to main.  In
 *   main each block counts its loads up to 3; at the head a block with a
 *   count goes back to the tail with one less (a clock), one without
 *   leaves.  A long document stored once and never loaded passes through
 *   the small FIFO only, and so never pushes out the shared prefixes that
 *   live in main.  The small FIFO keeps its newest block while main has
 *   one to give: in a budget of a few blocks its share is less than one,
 *   and each block stored would go at the very next choice.
 * - KVT_EVICT_S3FIFO_ADAPTIVE: S3-FIFO whose small FIFO's share moves as
 *   ARC's target does (Megiddo and Modha, FAST 2003).  Blocks that leave
 *   main leave ghost keys too; a block stored again while its key is a
 *   ghost of the small FIFO grows the share (that FIFO let it go too
 *   soon), one that was a ghost of main shrinks it, between 1% and 99%.
 *   It keeps S3-FIFO's resistance to scans and loses less than S3-FIFO
 *   where blocks come back once after a long time; the measurements
 *   that chose it are in docs/performance.md.
 * - KVT_EVICT_SLRU: a segmented LRU.  A new block is on probation; one
 *   used again is protected; protected blocks past 80% of the bytes go
 *   back to probation, and victims come from probation, least recently
 *   used first, then from the protected ones.
 * - KVT_EVICT_LRU: the exact least recently used order, a use being an
 *   insert or a touch; what the others are measured against.
 *
 * A pinned block (open, pending, being loaded) is never chosen: LRU
 * and SLRU pass over it; S3-FIFO moves it on as if it had been loaded.
 *
 * Memory: one node of 56 bytes (64 with malloc's header) and one slot of
 * a GHashTable (a key pointer and a hash, 12 bytes, at a load of 25-100%)
 * per block; S3-FIFO keeps at most as many ghost keys as blocks (both
 * ghosts together when adaptive), each a node of its own.  Measured by
 * tests/test-evict over 1,000,000 blocks (RSS): 90 bytes per block
 * without ghosts, 179 with as many ghosts as blocks.
 * KVT_EVICT_MAX_BYTES_PER_BLOCK is the bound the test holds it to.
 *
 * Not thread-safe: the caller serialises every call (its own lock).  No
 * global state: any number of indexes may live side by side. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

/* What a block costs the index at most, its ghost key included. */
#define KVT_EVICT_MAX_BYTES_PER_BLOCK 256

enum kvt_evict_policy {
	KVT_EVICT_LRU,
	KVT_EVICT_S3FIFO,
	KVT_EVICT_SLRU,
	KVT_EVICT_S3FIFO_ADAPTIVE,
};

/* The knobs of S3-FIFO and SLRU; zero fields take the defaults. */
struct kvt_evict_tuning {
	unsigned small_pct;     /* S3-FIFO: the small FIFO's share of the bytes: 10
				 * (adaptive: where the share starts) */
	unsigned promote_loads; /* S3-FIFO: loads in the small FIFO that move a block to main: 1 */
	unsigned ghost_pct;     /* S3-FIFO: ghost keys, in % of the blocks held: 100 */
	unsigned protected_pct; /* SLRU: the protected blocks' share of the bytes: 80 */
};

struct kvt_evict;

/* @tuning may be NULL (the defaults). */
struct kvt_evict *kvt_evict_new(enum kvt_evict_policy policy,
				const struct kvt_evict_tuning *tuning);
void kvt_evict_free(struct kvt_evict *e);

/* A store of @key, of @size bytes, under @name: what S3-FIFO's ghosts
 * know a block by, so that one stored again under the same name with
 * another key (a new file's inode) is known as a return.  A key held
 * already is a use of it (its size and name are updated); returns true
 * when the key was new.  kvt_evict_insert: @name is @key. */
bool kvt_evict_insert_as(struct kvt_evict *e, uint64_t key, uint64_t name, uint64_t size);
bool kvt_evict_insert(struct kvt_evict *e, uint64_t key, uint64_t size);
/* A victim the caller could not delete (in use): held again, in main for
 * S3-FIFO, without counting as a ghost's return. */
void kvt_evict_keep(struct kvt_evict *e, uint64_t key, uint64_t name, uint64_t size);
/* A load of @key: a use.  False when the key is not held (nothing done). */
bool kvt_evict_touch(struct kvt_evict *e, uint64_t key);
/* @key is gone (an unlink, a purge): forgotten, pinned or not, and not
 * remembered as a ghost.  False when it was not held. */
bool kvt_evict_remove(struct kvt_evict *e, uint64_t key);
bool kvt_evict_contains(const struct kvt_evict *e, uint64_t key);

/* Pins nest; false when the key is not held.  Removing a pinned key
 * drops its pins, and an unpin of a key not held does nothing. */
bool kvt_evict_pin(struct kvt_evict *e, uint64_t key);
void kvt_evict_unpin(struct kvt_evict *e, uint64_t key);

/* Chooses unpinned blocks until their sizes add up to @bytes or none is
 * left, appends their keys (uint64_t) to @victims in eviction order, and
 * forgets them (S3-FIFO keeps the small FIFO's as ghosts); the caller
 * deletes them, and inserts again one it could not delete.  Returns the
 * bytes chosen.  Its cost grows with the blocks chosen and the pinned or
 * loaded ones it passes, not with the blocks held. */
uint64_t kvt_evict_choose(struct kvt_evict *e, uint64_t bytes, GArray *victims);

uint64_t kvt_evict_bytes(const struct kvt_evict *e);        /* held */
uint64_t kvt_evict_count(const struct kvt_evict *e);        /* blocks held */
uint64_t kvt_evict_pinned_bytes(const struct kvt_evict *e);
uint64_t kvt_evict_ghosts(const struct kvt_evict *e);       /* ghost keys */
const char *kvt_evict_policy_name(enum kvt_evict_policy policy);
