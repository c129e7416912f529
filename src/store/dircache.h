/* A bounded cache of held lower directories, keyed by a number the caller
 * chooses (the daemon: a directory inode's serial).  It keeps at most its
 * capacity of directories open; past it the least recently used is let
 * go.  A directory handed out stays open for its holder until the holder
 * lets it go too, so the fds open at any time are the capacity plus those
 * in use by requests in flight, whatever the number of directories. */
#pragma once
#include <glib.h>
#include <stdint.h>

#include "lower.h"

struct kvt_dircache;

struct kvt_dircache *kvt_dircache_new(guint capacity);
guint kvt_dircache_capacity(const struct kvt_dircache *c);
void kvt_dircache_free(struct kvt_dircache *c);

/* The directory cached under @key, referenced, or NULL. */
struct kvt_dir *kvt_dircache_get(struct kvt_dircache *c, uint64_t key);
/* Caches @d (taking a reference of its own) under @key. */
void kvt_dircache_put(struct kvt_dircache *c, uint64_t key, struct kvt_dir *d);
void kvt_dircache_drop(struct kvt_dircache *c, uint64_t key);
guint kvt_dircache_size(struct kvt_dircache *c);
