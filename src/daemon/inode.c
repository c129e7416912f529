/* In-memory inode lifetime, the children tables, and each directory's
 * way to its lower directory; the kernel's lookup counts and the bound on
 * the inodes it holds (inode.h). */
#include "inode.h"

#include <errno.h>
#include <string.h>

#include "dircache.h"
#include "notify.h"
#include "object.h"

static uint64_t next_serial = 1;

/* st_ino: the lower inode number of what the inode shows (its record,
 * its directory), so that a listing, which reads the lower directory,
 * says the number stat will say, without an inode for every name, and
 * a lookup after the kernel forgot the inode, or a remount, gives it
 * again.  A file's number is its current record's, and no two names show
 * one number, even where the lower file system gives a removed record's
 * number to a new one.  A file made here shows from its create the
 * number of the record file its stage made for it (stage.h), which its
 * publication installs: a file keeps its number from create to unlink
 * (tar, rsync and git compare it).  A version written over a published
 * file is a new record, so a new number.  Until an inode is given its
 * number it has its serial, above any number a lower file system gives. */
#define LOCAL_INO_BASE (G_GUINT64_CONSTANT(1) << 62)

static struct kvt_inode *inode_alloc(struct kvt_fs *fs, struct kvt_inode *parent,
				     const char *name)
{
	struct kvt_inode *ino = g_new0(struct kvt_inode, 1);

	ino->serial = __atomic_add_fetch(&next_serial, 1, __ATOMIC_RELAXED);
	ino->st_ino = LOCAL_INO_BASE | ino->serial;
	ino->name = g_strdup(name);
	ino->parent = parent;
	g_mutex_init(&ino->lock);
	g_cond_init(&ino->published);
	kvt_record_init(&ino->rec);
	ino->live.data = ino;
	g_mutex_lock(&fs->live_lock);
	g_queue_push_tail_link(&fs->live_inodes, &ino->live);
	g_mutex_unlock(&fs->live_lock);
	return ino;
}

struct kvt_inode *kvt_inode_new_dir(struct kvt_fs *fs, struct kvt_inode *parent,
				    const char *name, const struct stat *st)
{
	struct kvt_inode *ino = inode_alloc(fs, parent, name);

	ino->is_dir = true;
	ino->dev = st->st_dev;
	ino->lower_ino = st->st_ino;
	ino->st_ino = st->st_ino;
	ino->children = g_hash_table_new(g_str_hash, g_str_equal);
	return ino;
}

struct kvt_inode *kvt_inode_new_root(struct kvt_fs *fs, struct kvt_dir *names)
{
	struct stat st = { .st_dev = names->dev, .st_ino = names->ino };
	struct kvt_inode *root = kvt_inode_new_dir(fs, NULL, "", &st);

	kvt_inode_ref(root); /* never forgotten */
	return root;
}

struct kvt_inode *kvt_inode_new_file(struct kvt_fs *fs, struct kvt_inode *parent,
				     const char *name)
{
	return inode_alloc(fs, parent, name);
}

bool kvt_inode_is_local(struct kvt_inode *ino)
{
	bool local;

	if (ino->is_dir)
		return false;
	kvt_inode_lock(ino);
	local = kvt_inode_local(ino);
	kvt_inode_unlock(ino);
	return local;
}

void kvt_inode_ref(struct kvt_inode *ino)
{
	kvt_inode_check_live(ino, "reference");
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
	/* Read without the tree lock for st_nlink (resolve.c). */
	__atomic_store_n(&child->unlinked, true, __ATOMIC_RELAXED);
}

#ifdef KVT_INODE_QUARANTINE
/*
 * Checked builds keep the last freed inodes, marked, instead of giving
 * them back to malloc: a call that still uses one (a reference it did not
 * hold, a kernel FORGET in between) aborts at its next lock or reference
 * with the inode named, where the plain build would read memory malloc
 * may have handed out again, and go on silently.
 */
#define QUARANTINE 16384

static GMutex quarantine_lock;
static GQueue quarantine = G_QUEUE_INIT;

static void quarantine_add(struct kvt_inode *ino)
{
	struct kvt_inode *old = NULL;

	g_atomic_int_set(&ino->refs, KVT_INODE_FREED);
	g_mutex_lock(&quarantine_lock);
	g_queue_push_tail(&quarantine, ino);
	if (quarantine.length > QUARANTINE)
		old = g_queue_pop_head(&quarantine);
	g_mutex_unlock(&quarantine_lock);
	g_free(old);
}

void kvt_inode_check_live(const struct kvt_inode *ino, const char *what)
{
	if (g_atomic_int_get(&ino->refs) == KVT_INODE_FREED)
		g_error("%s: inode %p was freed", what, (const void *)ino);
}

static void quarantine_free_all(void)
{
	g_mutex_lock(&quarantine_lock);
	g_queue_clear_full(&quarantine, g_free);
	g_mutex_unlock(&quarantine_lock);
}
#else
static void quarantine_add(struct kvt_inode *ino)
{
	g_free(ino);
}

static void quarantine_free_all(void)
{
}
#endif

static void inode_free(struct kvt_fs *fs, struct kvt_inode *ino)
{
	kvt_lru_forget(fs, ino);
	g_mutex_lock(&fs->live_lock);
	g_queue_unlink(&fs->live_inodes, &ino->live);
	g_mutex_unlock(&fs->live_lock);
	kvt_stage_unref(ino->stage);
	kvt_bounds_xattr_drop(fs, ino);
	if (ino->release_on_free)
		kvt_object_release(fs->store, &ino->rec);
	if (ino->is_dir)
		kvt_dircache_drop(fs->dirs, ino->serial);
	if (ino->children)
		g_hash_table_unref(ino->children);
	kvt_record_clear(&ino->rec);
	g_cond_clear(&ino->published);
	g_mutex_clear(&ino->lock);
	g_free(ino->name);
	quarantine_add(ino);
}

void kvt_inode_discard(struct kvt_fs *fs, struct kvt_inode *ino)
{
	inode_free(fs, ino);
}

void kvt_inode_unref(struct kvt_fs *fs, struct kvt_inode *ino)
{
	kvt_lock_assert_none("kvt_inode_unref");
	/* The last reference goes under the parent's lock, where lookups
	 * find and reference children: no lookup can revive a freed inode. */
	while (ino) {
		struct kvt_inode *p;
		bool attached;

		kvt_inode_check_live(ino, "unreference");
		kvt_tree_lock(fs);
		p = ino->parent;
		if (p)
			kvt_inode_lock(p);
		kvt_tree_unlock(fs);
		if (!g_atomic_int_dec_and_test(&ino->refs)) {
			if (p)
				kvt_inode_unlock(p);
			return;
		}
		attached = p && !ino->unlinked &&
			   g_hash_table_lookup(p->children, ino->name) == ino;
		if (attached)
			g_hash_table_remove(p->children, ino->name);
		if (p)
			kvt_inode_unlock(p);
		inode_free(fs, ino);
		/* Every child holds one reference on its parent while it
		 * lives, attached or not. */
		ino = p;
	}
}

/* Drops a reference the caller knows is not the last (another holder is
 * pinned by a lock the caller holds), so no lock needs to be taken. */
static void unref_not_last(struct kvt_inode *ino)
{
	gint was = g_atomic_int_add(&ino->refs, -1);

	g_assert(was > 1);
}

/* "dir/name" from the root, for messages; the tree is not changing. */
static char *path_of(struct kvt_fs *fs, struct kvt_inode *ino)
{
	GPtrArray *names = g_ptr_array_new();
	GString *path = g_string_new(NULL);

	for (; ino && ino != fs->root; ino = ino->parent)
		g_ptr_array_add(names, ino->unlinked ? "(unlinked)" : ino->name);
	for (guint i = names->len; i > 0; i--)
		g_string_append_printf(path, "%s%s", path->len ? "/" : "",
				       (char *)names->pdata[i - 1]);
	g_ptr_array_free(names, TRUE);
	return g_string_free(path, FALSE);
}

/* Nothing unpublished survives the mount (design invariant): each file
 * dropped so gets a line, so that an operator knows what a stop cost. */
static void log_dropped(struct kvt_fs *fs)
{
	for (GList *l = fs->live_inodes.head; l; l = l->next) {
		struct kvt_inode *ino = l->data;
		g_autofree char *path = NULL;

		if (ino->is_dir || !ino->stage ||
		    kvt_stage_state(ino->stage) == KVT_STAGE_PUBLISHED)
			continue;
		path = path_of(fs, ino);
		g_message("unmount: dropped %s, never published (%" G_GUINT64_FORMAT
			  " bytes written, %d writer(s) open)",
			  path, kvt_stage_size(ino->stage), ino->writers);
	}
}

void kvt_inodes_free_all(struct kvt_fs *fs)
{
	GList *l;

	log_dropped(fs);
	while ((l = g_queue_peek_head_link(&fs->live_inodes)))
		inode_free(fs, l->data);
	fs->root = NULL;
	quarantine_free_all();
}

/* @ino's parent, referenced, and its name in *@name; NULL once it is
 * unlinked. */
static struct kvt_inode *parent_of(struct kvt_fs *fs, struct kvt_inode *ino, char **name)
{
	struct kvt_inode *p;

	kvt_tree_lock(fs);
	p = ino->unlinked ? NULL : ino->parent;
	if (p) {
		kvt_inode_ref(p);
		*name = g_strdup(ino->name);
	}
	kvt_tree_unlock(fs);
	return p;
}

/* @d, opened by @dir's name in @p, becomes @dir's lower directory if
 * @dir is still @p's @name: not renamed by this mount meanwhile (a
 * rename moves the lower name and the tree together, under the tree
 * lock) nor detached by a lookup that found another directory there
 * (under the parent's lock, where lookups compare it). */
static bool take_dir(struct kvt_fs *fs, struct kvt_inode *p, struct kvt_inode *dir,
		     const char *name, struct kvt_dir *d)
{
	bool same;

	if (d->dev != dir->dev)
		return false;
	kvt_tree_lock(fs);
	kvt_inode_lock(p);
	same = !dir->unlinked && dir->parent == p && strcmp(dir->name, name) == 0;
	if (same)
		dir->lower_ino = d->ino;
	kvt_inode_unlock(p);
	kvt_tree_unlock(fs);
	return same;
}

/* @d, opened by @dir's name, is another directory than the one @dir
 * knows: another mount removed it and made one again (an evictor's
 * rmdir, then a store's mkdir -p), or a network file system gave it
 * another identity.  It becomes @dir's, as kvt_inode_dir_remake would
 * make it. */
static bool adopt_dir(struct kvt_fs *fs, struct kvt_inode *p, struct kvt_inode *dir,
		      const char *name, struct kvt_dir *d)
{
	if (!take_dir(fs, p, dir, name, d))
		return false;
	g_message("directory %s was made again by another mount: this mount's is "
		  "the one there now", name);
	return true;
}

void kvt_inode_dir_seen(struct kvt_inode *dir, const struct stat *st)
{
	kvt_inode_lock(dir);
	dir->meta.st_mode = st->st_mode;
	dir->meta.st_uid = st->st_uid;
	dir->meta.st_gid = st->st_gid;
	kvt_inode_unlock(dir);
}

int kvt_inode_dir(struct kvt_fs *fs, struct kvt_inode *dir, struct kvt_dir **out)
{
	g_autofree char *was = NULL;
	guint64 was_p = 0;
	int ret = -ENOENT;

	kvt_lock_assert_none("kvt_inode_dir");
	if (dir == fs->root) {
		*out = kvt_dir_ref(kvt_store_names(fs->store));
		return 0;
	}
	*out = kvt_dircache_get(fs->dirs, dir->serial);
	if (*out)
		return 0;
	/* A rename may move it while we open: try its new place again, and
	 * only a new place (each level would try its parent four times). */
	for (int attempt = 0; attempt < 4; attempt++) {
		g_autofree char *name = NULL;
		struct kvt_dir *pd = NULL, *d = NULL;
		struct kvt_inode *p = parent_of(fs, dir, &name);

		if (!p)
			return -ENOENT;
		if (p->serial == was_p && g_strcmp0(name, was) == 0) {
			kvt_inode_unref(fs, p);
			break;
		}
		was_p = p->serial;
		g_free(was);
		was = g_strdup(name);
		ret = kvt_inode_dir(fs, p, &pd);
		if (ret == 0) {
			ret = kvt_dir_open_path(pd, name, false, &d);
			kvt_dir_unref(pd);
		}
		if (ret == 0 && (d->dev != dir->dev || d->ino != dir->lower_ino) &&
		    !adopt_dir(fs, p, dir, name, d)) {
			kvt_dir_unref(d);
			ret = -ENOENT; /* what is there now came by this mount's rename */
		}
		kvt_inode_unref(fs, p);
		if (ret == 0) {
			struct stat seen;

			if (kvt_dir_seen(d, &seen) == 0)
				kvt_inode_dir_seen(dir, &seen);
			kvt_dircache_put(fs->dirs, dir->serial, d);
			*out = d;
			return 0;
		}
		if (ret != -ENOENT && ret != -ENOTDIR)
			return ret;
	}
	return -ENOENT;
}

int kvt_inode_dir_to_make(struct kvt_fs *fs, struct kvt_inode *dir, struct kvt_dir **out)
{
	int ret = kvt_inode_dir(fs, dir, out);

	if (ret == -ENOENT && dir != fs->root)
		ret = kvt_inode_dir_remake(fs, dir, out);
	return ret;
}

bool kvt_dir_gone(struct kvt_dir *d)
{
	nlink_t nlink;
	int ret = kvt_dir_links_now(d, &nlink);

	/* A removed directory has no link left on a local file system; a
	 * network one may answer that it does not know it any more. */
	return ret == -ENOENT || ret == -ESTALE || (ret == 0 && nlink == 0);
}

int kvt_inode_dir_remake(struct kvt_fs *fs, struct kvt_inode *dir, struct kvt_dir **out)
{
	g_autofree char *name = NULL;
	struct kvt_dir *pd = NULL, *d = NULL, *old;
	struct kvt_inode *p;
	bool made = false, known = false;
	struct stat was, now;
	int ret;

	*out = NULL;
	if (dir == fs->root)
		return -ENOENT; /* names/ itself: the store is broken */
	/* Made again as this mount last saw it. */
	old = kvt_dircache_get(fs->dirs, dir->serial);
	if (old) {
		known = kvt_dir_seen(old, &was) == 0;
		kvt_dir_unref(old);
	}
	if (!known) {
		kvt_inode_lock(dir);
		known = dir->meta.st_mode != 0;
		was = dir->meta;
		kvt_inode_unlock(dir);
	}
	p = parent_of(fs, dir, &name);
	if (!p)
		return -ENOENT;
	ret = kvt_inode_dir(fs, p, &pd);
	if (ret == -ENOENT && p != fs->root) {
		ret = kvt_inode_dir_remake(fs, p, &pd);
	} else if (ret == 0 && p != fs->root && kvt_dir_gone(pd)) {
		kvt_dir_unref(pd);
		ret = kvt_inode_dir_remake(fs, p, &pd);
	}
	if (ret == 0) {
		ret = kvt_dir_open(pd, name, &d);
		if (ret == -ENOENT) {
			/* Another owner than the daemon's is written in it
			 * (below): its own is the daemon's, 0700. */
			ret = kvt_dir_mkdir(pd, name, !known ? 0755 :
					    was.st_uid == geteuid() && was.st_gid == getegid() ?
					    was.st_mode & 07777 : 0700);
			made = ret == 0;
			if (ret == 0 || ret == -EEXIST)
				ret = kvt_dir_open(pd, name, &d);
		}
	}
	if (ret == 0 && made && known && kvt_dir_stat(d, NULL, &now) == 0 &&
	    (now.st_uid != was.st_uid || now.st_gid != was.st_gid ||
	     (now.st_mode & 07777) != (was.st_mode & 07777)))
		/* Best effort: the directory is there to use either way. */
		kvt_dir_set_shown(d, KVT_SET_UID | KVT_SET_GID | KVT_SET_MODE, was.st_mode,
				  was.st_uid, was.st_gid);
	if (ret == 0 && !take_dir(fs, p, dir, name, d)) {
		kvt_dir_unref(d);
		ret = -ENOENT; /* renamed meanwhile, or another device there */
	}
	if (ret == 0) {
		kvt_dircache_put(fs->dirs, dir->serial, d);
		g_message("directory %s was removed by another mount: %s", name,
			  made ? "made again" : "another mount made it again; using that one");
		*out = d;
	}
	kvt_dir_unref(pd);
	kvt_inode_unref(fs, p);
	return ret;
}

struct kvt_inode *kvt_lock_parent(struct kvt_fs *fs, struct kvt_inode *ino,
				  struct kvt_dir **d, int *err)
{
	*d = NULL;
	*err = 0;
	for (;;) {
		struct kvt_dir *pd = NULL;
		struct kvt_inode *p;
		bool same;
		int ret;

		kvt_tree_lock(fs);
		p = ino->unlinked ? NULL : ino->parent;
		if (p)
			kvt_inode_ref(p);
		kvt_tree_unlock(fs);
		if (!p)
			return NULL;
		ret = kvt_inode_dir(fs, p, &pd);
		kvt_tree_lock(fs);
		same = ino->parent == p && !ino->unlinked;
		if (same && ret == 0)
			kvt_inode_lock(p);
		kvt_tree_unlock(fs);
		if (same && ret == 0) {
			/* @ino, still a child of @p, holds its own reference. */
			unref_not_last(p);
			if (ino->unlinked) { /* an unlink got there first */
				kvt_inode_unlock(p);
				kvt_dir_unref(pd);
				return NULL;
			}
			*d = pd;
			return p;
		}
		kvt_dir_unref(pd);
		kvt_inode_unref(fs, p);
		if (same) {
			*err = ret;
			return NULL;
		}
	}
}

/* The kernel's references to inodes: each LOOKUP reply is one, FORGET
 * gives them back, and the inode lives while the kernel holds any.  The
 * kernel keeps what it looked up until memory runs short, so past
 * -o max_inodes names are dropped from its dentry cache (it then forgets
 * them) and the daemon's memory stays bounded.  Which go: the names the
 * kernel looked up least recently (a lookup is the one use the daemon
 * sees of a name the kernel holds; a name looked up uses its directory
 * too), files before directories: a directory dropped takes its whole
 * subtree with it, and in vLLM's fan-out the next lookup below it would
 * cost a round trip a level. */

/* A file or directory the kernel knows, in fs->lru_files or lru_dirs. */
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

static GQueue *lru_of(struct kvt_fs *fs, const struct kvt_inode *ino)
{
	return ino->is_dir ? &fs->lru_dirs : &fs->lru_files;
}

/* Caller holds fs->lru_lock: @ino, known, is the most recently used. */
static void lru_touch(struct kvt_fs *fs, struct kvt_inode *ino)
{
	GQueue *q = lru_of(fs, ino);

	if (ino->lru && q->tail != &ino->lru->link) {
		g_queue_unlink(q, &ino->lru->link);
		g_queue_push_tail_link(q, &ino->lru->link);
	}
}

/* Enters an inode into the kernel's names, and asks the kernel to drop
 * the least recently used past fs->max_inodes (caller holds the parent's
 * lock, which keeps ino->name). */
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
	g_queue_push_tail_link(lru_of(fs, ino), &e->link);
	if (ino->parent != fs->root)
		lru_touch(fs, ino->parent);
	while (fs->lru_files.length + fs->lru_dirs.length > fs->max_inodes &&
	       n < (int)G_N_ELEMENTS(drop)) {
		GQueue *q = fs->lru_files.length ? &fs->lru_files : &fs->lru_dirs;
		struct kvt_lru_entry *old = g_queue_pop_head_link(q)->data;

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
		if (ino != fs->root && !ino->lru) {
			lru_add(fs, ino);
			return;
		}
	}
	if (ino == fs->root)
		return;
	/* Looked up again (the kernel's entry timed out, or it forgot and
	 * relearnt it): used, and its directory with it. */
	g_mutex_lock(&fs->lru_lock);
	lru_touch(fs, ino);
	if (ino->parent != fs->root)
		lru_touch(fs, ino->parent);
	g_mutex_unlock(&fs->lru_lock);
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
		g_queue_unlink(lru_of(fs, ino), &ino->lru->link);
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

	while ((l = g_queue_pop_head_link(&fs->lru_files)) ||
	       (l = g_queue_pop_head_link(&fs->lru_dirs))) {
		struct kvt_lru_entry *e = l->data;

		e->ino->lru = NULL;
		entry_free(e);
	}
}
