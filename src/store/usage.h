/* The tier's usage and its budget: the bytes of the store's objects
 * (each distinct object once, whatever number of names share it), held
 * to -o max_size and -o min_free.
 *
 * The usage is a count of objects/ (the size of every distinct inode in
 * each fan-out directory), made in the background when the store opens
 * and again every KVT_USAGE_RECOUNT_S, so that removals outside the mount
 * are taken in; between two counts this mount's new objects and the
 * objects it removes move it, and so do, within a second, those of the
 * other mounts of the store that have a budget (ledger.h).  Until the
 * first count ends the usage is not known, and a new object is taken
 * unless the lower file system's own use is over the budget (the
 * conservative bound: the store's objects are part of it); one refused
 * so waits for the count (KVT_USAGE_FIRST_COUNT_WAIT_S at most).
 *
 * A new object past the budget (max_size, or min_free of the lower file
 * system) is refused with ENOSPC, one log line every 10 s: its name is
 * not published.  A store of bytes the store holds already (a dedup)
 * makes no object and is never refused. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

struct kvt_store;

#define KVT_USAGE_RECOUNT_S 300
/* How long a store refused by the conservative bound waits for the
 * first count to end. */
#define KVT_USAGE_FIRST_COUNT_WAIT_S 5

/* Sets the budget (@max_bytes 0: none; @min_free_pct of the lower file
 * system kept free, 0: none) and starts the count, if there is one. */
void kvt_usage_start(struct kvt_store *s, uint64_t max_bytes, unsigned min_free_pct);
void kvt_usage_stop(struct kvt_store *s);
/* The usage: true with *@bytes once counted. */
bool kvt_usage_get(struct kvt_store *s, uint64_t *bytes);
/* The budget now: max_size, or less when min_free leaves less; 0: none. */
uint64_t kvt_usage_budget(struct kvt_store *s);

/* A publication made under the caller's own locks (kvt_store_publish)
 * does not wait for the evictor, which may need those locks: it sets
 * this around it (the previous value returned), and its caller may call
 * kvt_usage_wait_room before it takes them. */
bool kvt_usage_set_nowait(bool nowait);
/* Waits (a few seconds at most) for the evictor to make room for @size
 * bytes more, if the budget leaves none, and holds that room for this
 * thread's next publication under nowait: other stores cannot take it
 * meanwhile.  kvt_usage_release_room lets it go, after the publication
 * (made or not). */
void kvt_usage_wait_room(struct kvt_store *s, uint64_t size);
void kvt_usage_release_room(struct kvt_store *s);

/* For object.c: room for a new object of @size bytes (-ENOSPC), and the
 * moves of the usage. */
int kvt_usage_room(struct kvt_store *s, uint64_t size);
/* @bytes more (or less) in objects/ fan-out directory @fan (0-255). */
void kvt_usage_move(struct kvt_store *s, unsigned fan, int64_t bytes);
/* The fan-out directory of the object link @name ("<2 hex>..."). */
unsigned kvt_usage_fan_of(const char *name);
