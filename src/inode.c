/* In-memory inode lifetime and the children tables (rules in inode.h). */
#include "inode.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static uint64_t next_serial = 1;

static struct kvt_inode *inode_alloc(struct kvt_inode *parent, const char *name)
{
	struct kvt_inode *ino = g_new0(struct kvt_inode, 1);

	ino->serial = __atomic_add_fetch(&next_serial, 1, __ATOMIC_RELAXED);
	ino->name = g_strdup(name);
	ino->parent = parent;
	ino->fd = -1;
	g_mutex_init(&ino->lock);
	g_cond_init(&ino->published);
	kvt_record_init(&ino->rec);
	return ino;
}

struct kvt_inode *kvt_inode_new_dir(struct kvt_inode *parent, const char *name,
				    int fd, const struct stat *st)
{
	struct kvt_inode *ino = inode_alloc(parent, name);

	ino->is_dir = true;
	ino->fd = fd;
	ino->dev = st->st_dev;
	ino->lower_ino = st->st_ino;
	ino->children = g_hash_table_new(g_str_hash, g_str_equal);
	return ino;
}

struct kvt_inode *kvt_inode_new_file(struct kvt_inode *parent, const char *name)
{
	return inode_alloc(parent, name);
}

void kvt_inode_ref(struct kvt_inode *ino)
{
	g_atomic_int_inc(&ino->refs);
}

void kvt_inode_attach(struct kvt_inode *parent, struct kvt_inode *child)
{
	g_hash_table_replace(parent->children, child->name, child);
	kvt_inode_ref(parent);
}

void kvt_inode_detach(struct kvt_inode *child)
{
	struct kvt_inode *p = child->parent;

	if (!child->unlinked && p &&
	    g_hash_table_lookup(p->children, child->name) == child)
		g_hash_table_remove(p->children, child->name);
	child->unlinked = true;
}

static void inode_free(struct kvt_fs *fs, struct kvt_inode *ino)
{
	g_mutex_lock(&fs->lru_lock);
	if (ino->lru) {
		g_queue_unlink(&fs->lru, &ino->lru->link);
		g_free(ino->lru->name);
		g_free(ino->lru);
	}
	g_mutex_unlock(&fs->lru_lock);
	if (ino->stage)
		kvt_stage_put(fs->store, ino->stage);
	if (ino->release_on_free)
		kvt_object_release(fs->store, &ino->rec);
	if (ino->fd >= 0)
		close(ino->fd);
	if (ino->children)
		g_hash_table_unref(ino->children);
	kvt_record_clear(&ino->rec);
	g_cond_clear(&ino->published);
	g_mutex_clear(&ino->lock);
	g_free(ino->name);
	g_free(ino);
}

void kvt_inode_unref(struct kvt_fs *fs, struct kvt_inode *ino)
{
	/* The last reference goes under the parent's lock, where lookups
	 * find and reference children: no lookup can revive a freed inode. */
	while (ino) {
		struct kvt_inode *p;
		bool attached;

		g_mutex_lock(&fs->tree_lock);
		p = ino->parent;
		if (p)
			g_mutex_lock(&p->lock);
		g_mutex_unlock(&fs->tree_lock);
		if (!g_atomic_int_dec_and_test(&ino->refs)) {
			if (p)
				g_mutex_unlock(&p->lock);
			return;
		}
		attached = p && !ino->unlinked &&
			   g_hash_table_lookup(p->children, ino->name) == ino;
		if (attached)
			g_hash_table_remove(p->children, ino->name);
		if (p)
			g_mutex_unlock(&p->lock);
		inode_free(fs, ino);
		/* Every child holds one reference on its parent while it
		 * lives, attached or not. */
		ino = p;
	}
}

struct kvt_inode *kvt_lock_parent(struct kvt_fs *fs, struct kvt_inode *ino)
{
	struct kvt_inode *p;

	g_mutex_lock(&fs->tree_lock);
	p = ino->parent;
	if (p)
		g_mutex_lock(&p->lock);
	g_mutex_unlock(&fs->tree_lock);
	if (p && ino->unlinked) {
		g_mutex_unlock(&p->lock);
		return NULL;
	}
	return p;
}

bool kvt_is_tmp_name(struct kvt_fs *fs, const char *name)
{
	return fs->tmp_suffix[0] && g_str_has_suffix(name, fs->tmp_suffix);
}

bool kvt_inode_pending(const struct kvt_inode *ino)
{
	return ino->stage && !ino->stage->consumed;
}

int kvt_stage_new(struct kvt_fs *fs, struct kvt_inode *ino, uint64_t keep,
		  struct kvt_stage **out)
{
	struct kvt_verify_result res;
	struct kvt_stage *st;
	struct stat sst;
	int ret, src;

	ret = kvt_stage_create_new(fs->store, &st);
	if (ret < 0 || !keep || !ino->has_record) {
		*out = ret < 0 ? NULL : st;
		return ret;
	}
	src = kvt_object_open(fs->store, &ino->rec, O_RDONLY);
	if (src < 0) {
		ret = src;
	} else if (fstat(src, &sst) ||
		   kvt_verify_fd(fs->verifier, src, &sst, &ino->rec, fs->verify_always,
				 &res) < 0) {
		/* A new version must not be built on torn bytes; the next
		 * open for reading purges them. */
		ret = -EIO;
	} else {
		ret = kvt_stage_fill(st, src, MIN(keep, ino->rec.size));
	}
	if (src >= 0)
		close(src);
	if (ret < 0) {
		kvt_stage_put(fs->store, st);
		return ret;
	}
	*out = st;
	return 0;
}

struct kvt_meta kvt_inode_meta(const struct kvt_inode *ino, bool set_times)
{
	struct kvt_meta m = {
		.mode = ino->meta.st_mode,
		.uid = ino->meta.st_uid,
		.gid = ino->meta.st_gid,
		.set_times = set_times,
		.atime = ino->meta.st_atim,
		.mtime = ino->meta.st_mtim,
	};
	return m;
}
