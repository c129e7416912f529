/* The daemon's lock order, written once, and a run-time check of it.
 *
 * Outermost first:
 *   1. fs->tree_lock   every inode's parent and name (changed by rename
 *                      and unlink), and the one place to find a file's
 *                      current parent;
 *   2. dir->lock       a directory's children table and the lower entries
 *                      under it.  A second one only in rename, under the
 *                      tree lock, in address order.  A lookup looks at the
 *                      lower disk without it, and takes what it saw only
 *                      if dir->gen shows nothing changed meanwhile
 *                      (resolve.c);
 *   3. file->lock      a file's record, stage and open counts;
 *   4. stage->io       (read-write) writes against sealing, stage.h.
 * Leaf locks (the LRU, the directory cache, the verifier's shards, a
 * stage's hash lock, the live lists) are taken last and hold nothing else.
 *
 * Never taken while a later one is held.  And one rule about references:
 * kvt_inode_unref() may free an inode, which takes the tree lock and the
 * parent's lock, so it is called with none of 1-4 held (error paths
 * included); kvt_inode_unref_held() is for the one case where the caller
 * knows the reference is not the last.
 *
 * Built with --enable-lock-checks, every acquisition is checked against
 * the locks the thread holds, and a violation aborts with both locks
 * named: a test that takes a wrong order fails at once, instead of hanging
 * one run in a thousand. */
#pragma once
#include <glib.h>

enum kvt_lock_rank {
	KVT_RANK_TREE = 1,
	KVT_RANK_DIR = 2,
	KVT_RANK_FILE = 3,
	KVT_RANK_STAGE = 4,
};

#ifdef KVT_LOCK_CHECKS
void kvt_lock_note(enum kvt_lock_rank rank, const void *lock);
void kvt_lock_unnote(const void *lock);
/* Aborts if the thread holds any ranked lock. */
void kvt_lock_assert_none(const char *what);
#else
static inline void kvt_lock_note(enum kvt_lock_rank rank, const void *lock)
{
	(void)rank;
	(void)lock;
}
static inline void kvt_lock_unnote(const void *lock)
{
	(void)lock;
}
static inline void kvt_lock_assert_none(const char *what)
{
	(void)what;
}
#endif

static inline void kvt_mutex_lock(GMutex *m, enum kvt_lock_rank rank)
{
	kvt_lock_note(rank, m);
	g_mutex_lock(m);
}

static inline void kvt_mutex_unlock(GMutex *m)
{
	kvt_lock_unnote(m);
	g_mutex_unlock(m);
}
