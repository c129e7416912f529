/* Lookup counts, FORGET, and the bound on the inodes the kernel holds
 * (forget.h). */
#include "forget.h"

#include "notify.h"
#include "ops.h"

/* A file or directory the kernel knows, in the order it learnt of them. */
struct kvt_lru_entry {
	GList link;
	struct kvt_inode *ino;
	fuse_ino_t parent;    /* nodeid of the directory */
	char *name;
};

static void entry_free(struct kvt_lru_entry *e)
{
	g_free(e->name);
	g_free(e);
}

/* Enters an inode into fs->lru, and asks the kernel to drop the oldest
 * names past fs->max_inodes (caller holds the parent's lock, which keeps
 * ino->name). */
static void lru_add(struct kvt_fs *fs, struct kvt_inode *ino)
{
	struct kvt_lru_entry *e = g_new0(struct kvt_lru_entry, 1);
	struct kvt_lru_entry *drop[16];
	int n = 0;

	e->link.data = e;
	e->ino = ino;
	e->parent = kvt_nodeid_of(fs, ino->parent);
	e->name = g_strdup(ino->name);
	g_mutex_lock(&fs->lru_lock);
	ino->lru = e;
	g_queue_push_tail_link(&fs->lru, &e->link);
	while (fs->lru.length > fs->max_inodes && n < (int)G_N_ELEMENTS(drop)) {
		struct kvt_lru_entry *old = g_queue_pop_head_link(&fs->lru)->data;

		old->ino->lru = NULL;
		drop[n++] = old;
	}
	g_mutex_unlock(&fs->lru_lock);
	/* Queued, not sent: the kernel holds this directory's lock while
	 * it waits for our reply. */
	for (int i = 0; i < n; i++) {
		kvt_notify_entry(fs, drop[i]->parent, drop[i]->name);
		entry_free(drop[i]);
	}
}

void kvt_count_lookup(struct kvt_fs *fs, struct kvt_inode *ino)
{
	if (ino->nlookup++ == 0) {
		kvt_inode_ref(ino);
		if (ino != fs->root && !ino->lru)
			lru_add(fs, ino);
	}
}

void kvt_forget(struct kvt_fs *fs, struct kvt_inode *ino, uint64_t n)
{
	struct kvt_inode *p;
	bool last;

	if (ino == fs->root)
		return;
	kvt_tree_lock(fs);
	p = ino->parent;
	kvt_inode_lock(p);
	kvt_tree_unlock(fs);
	g_assert(ino->nlookup >= n);
	ino->nlookup -= n;
	last = ino->nlookup == 0;
	kvt_inode_unlock(p);
	if (last)
		kvt_inode_unref(fs, ino);
}

void kvt_lru_forget(struct kvt_fs *fs, struct kvt_inode *ino)
{
	g_mutex_lock(&fs->lru_lock);
	if (ino->lru) {
		g_queue_unlink(&fs->lru, &ino->lru->link);
		entry_free(ino->lru);
		ino->lru = NULL;
	}
	g_mutex_unlock(&fs->lru_lock);
}

void kvt_lru_rename(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_inode *parent,
		    const char *name)
{
	g_mutex_lock(&fs->lru_lock);
	if (ino->lru) {
		g_free(ino->lru->name);
		ino->lru->name = g_strdup(name);
		ino->lru->parent = kvt_nodeid_of(fs, parent);
	}
	g_mutex_unlock(&fs->lru_lock);
}

void kvt_lru_free_all(struct kvt_fs *fs)
{
	GList *l;

	while ((l = g_queue_pop_head_link(&fs->lru))) {
		struct kvt_lru_entry *e = l->data;

		e->ino->lru = NULL;
		entry_free(e);
	}
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
