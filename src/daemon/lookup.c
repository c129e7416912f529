/* LOOKUP and FORGET, the kernel's references to inodes taken and given
 * back (inode.h counts them); GETATTR; STATFS. */
#include "ops.h"

#include <errno.h>
#include <string.h>

#include "resolve.h"
#include "usage.h"

void kvt_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *p = kvt_inode_of(fs, parent);
	struct kvt_note note = { 0 };
	struct fuse_entry_param e;
	g_autoptr(kvt_dir) pd = NULL;
	int ret = kvt_inode_dir(fs, p, &pd);

	if (ret == 0)
		ret = kvt_do_lookup(fs, p, pd, name, &e, &note);
	kvt_stat_add(&fs->stats, KVT_STAT_lookups, 1);
	kvt_stat_add(&fs->stats, ret == 0 ? KVT_STAT_hits : KVT_STAT_misses, 1);
	/* A negative entry: repeated misses (a prefix that is not stored)
	 * stay in the kernel.  Names created through this mount replace it.
	 * Not while another mount uses the store: a miss kept would hide
	 * what it makes, and a kernel before 6.7 keeps it even when its own
	 * mkdir is answered EEXIST, so that the next step of a mkdir -p
	 * fails with ENOENT. */
	if (ret == -ENOENT && fs->negative_timeout > 0 &&
	    !__atomic_load_n(&fs->shared, __ATOMIC_ACQUIRE)) {
		memset(&e, 0, sizeof(e));
		e.entry_timeout = fs->negative_timeout;
		fuse_reply_entry(req, &e);
	} else if (ret < 0) {
		fuse_reply_err(req, -ret);
	} else {
		fuse_reply_entry(req, &e);
	}
	/* The ENOENT reply drops the dentry; the inode may be cached too. */
	kvt_notify(fs, &note, false);
}

void kvt_op_forget(fuse_req_t req, fuse_ino_t n, uint64_t nlookup)
{
	struct kvt_fs *fs = kvt_fs_of(req);

	kvt_forget(fs, kvt_inode_of(fs, n), nlookup);
	fuse_reply_none(req);
}

void kvt_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct kvt_fs *fs = kvt_fs_of(req);

	for (size_t i = 0; i < count; i++)
		kvt_forget(fs, kvt_inode_of(fs, forgets[i].ino), forgets[i].nlookup);
	fuse_reply_none(req);
}

void kvt_op_getattr(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *ino = kvt_inode_of(fs, n);
	struct kvt_note note = { 0 };
	int ret = kvt_resolve_inode(fs, ino, &note);

	kvt_notify(fs, &note, true);
	/* Replaced by another mount (detached, not an ESTALE of the lower
	 * file system): what this inode was, unlinked; it is what an fstat
	 * of it asks for (fstat tells no handle), and a stat of the path
	 * finds the new version next time. */
	if (ret == -ESTALE && __atomic_load_n(&ino->unlinked, __ATOMIC_RELAXED))
		ret = 0;
	kvt_reply_attr(req, fs, ino, ret);
}

/* How long a statfs waits for the lower disk's answer to another one
 * before it takes the last figures. */
#define STATFS_PATIENCE_US (200 * G_TIME_SPAN_MILLISECOND)

/*
 * df and an evictor's free-space check must not hang with a lower disk
 * that stopped answering: one statvfs goes down at a time, and a statfs
 * that finds one under way waits for it briefly, then answers the last
 * figures the lower disk gave.  Only the thread that went down stalls.
 */
/* With a budget (usage.h), the file system's size is the budget and its
 * use the tier's, so that df and an evictor that watches statfs (llm-d's)
 * see the tier's own limit; never more free space than the lower file
 * system has. */
static void show_budget(struct kvt_fs *fs, struct statvfs *sv)
{
	uint64_t budget = kvt_usage_budget(fs->store), used, free_blocks;
	unsigned long bs = sv->f_frsize ? sv->f_frsize : sv->f_bsize;

	if (!budget || !bs || !kvt_usage_get(fs->store, &used))
		return;
	sv->f_blocks = budget / bs;
	free_blocks = used < budget ? (budget - used) / bs : 0;
	sv->f_bfree = MIN(free_blocks, (uint64_t)sv->f_bfree);
	sv->f_bavail = MIN(free_blocks, (uint64_t)sv->f_bavail);
}

void kvt_op_statfs(fuse_req_t req, fuse_ino_t n)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	gint64 until = g_get_monotonic_time() + STATFS_PATIENCE_US;
	struct statvfs sv;
	int ret = 0;

	(void)n;
	g_mutex_lock(&fs->statfs_lock);
	while (fs->statfs_busy && g_cond_wait_until(&fs->statfs_done, &fs->statfs_lock, until))
		;
	if (fs->statfs_busy) {
		sv = fs->statfs_last;
		g_mutex_unlock(&fs->statfs_lock);
		fuse_reply_statfs(req, &sv);
		return;
	}
	fs->statfs_busy = true;
	g_mutex_unlock(&fs->statfs_lock);

	ret = kvt_dir_statvfs(kvt_store_names(fs->store), &sv);
	if (ret == 0)
		show_budget(fs, &sv);

	g_mutex_lock(&fs->statfs_lock);
	fs->statfs_busy = false;
	if (ret == 0)
		fs->statfs_last = sv;
	g_cond_broadcast(&fs->statfs_done);
	g_mutex_unlock(&fs->statfs_lock);
	if (ret < 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_statfs(req, &sv);
}
