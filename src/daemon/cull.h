/* Evictions through the namespace: the store's evictor (evictor.h) picks
 * the names to go; here each goes as an unlink would, under the locks of
 * its directory and file, never while open, and the kernel is told to
 * forget it at once (notify.h), so that access() misses. */
#pragma once
#include "options.h"

struct kvt_fs;

/* Starts the evictor when the store has a budget and -o evict is not
 * off. */
void kvt_cull_start(struct kvt_fs *fs, const struct kvt_options *o);
/* Stops it: before the notifier and the session go. */
void kvt_cull_stop(struct kvt_fs *fs);
