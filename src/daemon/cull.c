/* Evictions through the namespace (cull.h). */
#include "cull.h"

#include <errno.h>
#include <string.h>

#include "evictor.h"
#include "inode.h"
#include "name.h"
#include "notify.h"

/* The directory at @dir (below the root) as the kernel knows it,
 * referenced; NULL when the kernel knows none there, and so holds no
 * entry below it to forget. */
static struct kvt_inode *known_dir(struct kvt_fs *fs, const char *dir)
{
	g_auto(GStrv) parts = g_strsplit(dir, "/", -1);
	struct kvt_inode *cur = fs->root, *next;

	kvt_inode_ref(cur);
	for (guint i = 0; parts[i] && cur; i++) {
		if (!parts[i][0])
			continue;
		kvt_inode_lock(cur);
		next = g_hash_table_lookup(cur->children, parts[i]);
		if (next && next->is_dir)
			kvt_inode_ref(next);
		else
			next = NULL;
		kvt_inode_unlock_quiet(cur);
		kvt_inode_unref(fs, cur);
		cur = next;
	}
	return cur;
}

/* A file being written, or read through the page cache, by this mount
 * (caller holds its lock); readers of the object are pinned in the
 * evictor (kvt_evictor_pin). */
static bool in_use(struct kvt_inode *ino)
{
	return ino->writers || kvt_inode_pending(ino) || ino->cache_readers;
}

static int evict_name(void *data, const char *path, uint64_t key, gint64 used_at)
{
	struct kvt_fs *fs = data;
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	g_autofree char *dir = slash ? g_strndup(path, (gsize)(slash - path)) : g_strdup("");
	g_autoptr(kvt_dir) d = NULL;
	struct kvt_inode *p = known_dir(fs, dir), *child = NULL;
	fuse_ino_t parent = 0;
	struct stat st;
	int ret;

	if (p)
		ret = kvt_inode_dir(fs, p, &d);
	else if (dir[0])
		ret = kvt_dir_open(kvt_store_names(fs->store), dir, &d);
	else
		ret = (d = kvt_dir_ref(kvt_store_names(fs->store))) ? 0 : -ENOENT;
	if (ret < 0)
		goto out;
	/* The parent's lock orders this with a lookup, an open (which pins
	 * under the file's lock) and an unlink of the name. */
	if (p) {
		kvt_inode_lock(p);
		child = g_hash_table_lookup(p->children, name);
		if (child && child->is_dir)
			child = NULL;
	}
	if (child)
		kvt_inode_lock(child);
	ret = kvt_dir_stat(d, name, &st);
	if (ret == 0 && (!S_ISREG(st.st_mode) || (uint64_t)st.st_ino != key))
		ret = -ESTALE; /* replaced since, or never a block */
	else if (ret == 0 && (kvt_evictor_pinned(fs->store, key) || (child && in_use(child))))
		ret = -EBUSY;
	else if (ret == 0 && st.st_atim.tv_sec * G_USEC_PER_SEC + st.st_atim.tv_nsec / 1000 >
				     used_at + KVT_EVICT_REMOTE_USE_US)
		ret = -EAGAIN; /* loaded on another host since */
	if (ret == 0)
		ret = kvt_name_remove(fs->store, d, name);
	if (child)
		kvt_inode_unlock(child);
	if (ret == 0 && child)
		kvt_inode_detach(child);
	if (p) {
		parent = kvt_nodeid_of(fs, p);
		kvt_inode_unlock(p);
	}
	if (ret == 0 && parent)
		kvt_notify_entry(fs, parent, name);
out:
	if (p)
		kvt_inode_unref(fs, p);
	return ret;
}

void kvt_cull_start(struct kvt_fs *fs, const struct kvt_options *o)
{
	static const enum kvt_evict_policy policies[] = {
		[KVT_EVICT_CHOICE_ADAPTIVE] = KVT_EVICT_S3FIFO_ADAPTIVE,
		[KVT_EVICT_CHOICE_S3FIFO] = KVT_EVICT_S3FIFO,
		[KVT_EVICT_CHOICE_SLRU] = KVT_EVICT_SLRU,
		[KVT_EVICT_CHOICE_LRU] = KVT_EVICT_LRU,
	};
	struct kvt_evictor_opts eo = {
		.high_pct = (unsigned)o->evict_high,
		.low_pct = (unsigned)o->evict_low,
		.evict_name = evict_name,
		.data = fs,
	};

	if (o->evict == KVT_EVICT_CHOICE_OFF)
		return;
	eo.policy = policies[o->evict];
	kvt_evictor_start(fs->store, &eo);
}

void kvt_cull_stop(struct kvt_fs *fs)
{
	kvt_evictor_stop(fs->store);
}
