/* Whether this mount has its store to itself, and so how long the kernel
 * may keep what it looked up.
 *
 * A name this mount published changes only when this mount changes it
 * (unlink, rename, purge, a new version), and the kernel learns each of
 * those at once: from the request itself, or from an invalidation
 * (notify.h).  So while no other mount uses the store, names and
 * attributes are cached for a day, and a lookup of a block stored an hour
 * ago costs no round trip.  Another mount may change any name behind the
 * kernel's back: while one holds its staging lock (checked every second),
 * or with -o shared, they are cached for a second, and when one appears
 * everything the kernel holds is invalidated.  -o entry_timeout and
 * attr_timeout, when given, hold whatever happens. */
#pragma once
#include "fs.h"

#define KVT_ALONE_TIMEOUT 86400.0
#define KVT_SHARED_TIMEOUT 1.0

/* The timeout to answer with: @configured (seconds), or by sharing when
 * it is negative (not given). */
static inline double kvt_timeout(struct kvt_fs *fs, double configured)
{
	if (configured >= 0)
		return configured;
	return __atomic_load_n(&fs->shared, __ATOMIC_ACQUIRE) ? KVT_SHARED_TIMEOUT
							       : KVT_ALONE_TIMEOUT;
}

struct kvt_share_watch;

/* Looks once (before the mount serves), then every second in a thread of
 * its own; with @forced (-o shared) the store counts as shared always. */
struct kvt_share_watch *kvt_share_watch_start(struct kvt_fs *fs, bool forced);
/* Stops the thread; NULL is a no-op. */
void kvt_share_watch_stop(struct kvt_share_watch *w);
