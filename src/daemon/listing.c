/* Directory listings: the lower directory's records and directories, and
 * the files being written here, which exist in memory only.  The listing
 * is taken at opendir, so offsets stay stable while the directory
 * changes, and again when a reader comes back to offset 0: after a
 * rewinddir(3), POSIX wants the names as they are then (an evictor that
 * keeps a directory open and rewinds it would see no new block). */
#include <errno.h>
#include <string.h>

#include "ops.h"
#include "resolve.h"

struct dir_entry {
	char *name;
	unsigned char type;
	uint64_t ino;          /* what stat says of it (inode.c) */
};

struct dir_handle {
	struct kvt_live live;
	GMutex lock;           /* taken first: entries, read */
	GArray *entries;       /* struct dir_entry */
	bool read;             /* read since the listing was taken */
};

static void dir_add(GArray *a, const char *name, unsigned char type, uint64_t ino)
{
	struct dir_entry d = { g_strdup(name), type, ino };

	g_array_append_val(a, d);
}

/* The type a listing says of a name: a record may be a file, a link or a
 * special file, which only reading it tells; unknown (DT_UNKNOWN, which
 * makes a reader that cares ask) until an inode was made from it.
 * Caller holds the directory's lock. */
static unsigned char entry_type(struct kvt_inode *c, unsigned char lower)
{
	unsigned char type = DT_REG;

	if (!c)
		return lower == DT_REG ? DT_UNKNOWN : lower;
	if (c->is_dir)
		return DT_DIR;
	kvt_inode_lock(c);
	if (c->has_record)
		type = IFTODT(kvt_kind_type(c->rec.kind));
	kvt_inode_unlock(c);
	return type;
}

static void clear_dir_entry(gpointer p)
{
	g_free(((struct dir_entry *)p)->name);
}

static void dir_handle_free(struct kvt_fs *fs, struct kvt_live *l)
{
	struct dir_handle *dh = (struct dir_handle *)l;

	if (dh->entries)
		g_array_unref(dh->entries);
	g_mutex_clear(&dh->lock);
	g_free(dh);
}

/* The names in @dir as of now; NULL and *@ret when its lower directory
 * cannot be listed. */
static GArray *take_listing(struct kvt_fs *fs, struct kvt_inode *dir, int *ret)
{
	g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
	g_autoptr(GPtrArray) lower = NULL;
	g_autoptr(kvt_dir) d = NULL;
	GArray *entries;
	GHashTableIter it;
	uint64_t up;
	gpointer k, v;

	*ret = kvt_inode_dir(fs, dir, &d);
	if (*ret < 0)
		return NULL;
	entries = g_array_new(FALSE, FALSE, sizeof(struct dir_entry));
	g_array_set_clear_func(entries, clear_dir_entry);
	kvt_tree_lock(fs);
	up = dir->parent ? dir->parent->st_ino : dir->st_ino;
	kvt_tree_unlock(fs);
	dir_add(entries, ".", DT_DIR, dir->st_ino);
	dir_add(entries, "..", DT_DIR, up);
	kvt_inode_lock(dir);
	lower = kvt_dir_list(d, false, ret);
	for (guint i = 0; lower && i < lower->len; i++) {
		const struct kvt_dirent *e = lower->pdata[i];
		struct kvt_inode *c = g_hash_table_lookup(dir->children, e->name);

		if (e->type != DT_DIR && e->type != DT_REG && e->type != DT_UNKNOWN)
			continue;
		/* The inode number stat will give: the known inode's, else
		 * the lower one, which an inode made from it takes. */
		dir_add(entries, e->name, entry_type(c, e->type), c ? c->st_ino : e->ino);
		g_hash_table_add(seen, (gpointer)e->name);
	}
	/* Files being written here exist only in memory so far. */
	g_hash_table_iter_init(&it, dir->children);
	while (lower && g_hash_table_iter_next(&it, &k, &v))
		if (!g_hash_table_contains(seen, k) && kvt_inode_is_local(v))
			dir_add(entries, k, DT_REG, ((struct kvt_inode *)v)->st_ino);
	kvt_inode_unlock(dir);
	if (!lower)
		g_clear_pointer(&entries, g_array_unref);
	return entries;
}

void kvt_op_opendir(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *dir = kvt_inode_of(fs, n);
	struct dir_handle *dh;
	GArray *entries;
	int ret;

	if (!dir->is_dir) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	entries = take_listing(fs, dir, &ret);
	if (!entries) {
		fuse_reply_err(req, -ret);
		return;
	}
	dh = g_new0(struct dir_handle, 1);
	g_mutex_init(&dh->lock);
	dh->entries = entries;
	kvt_live_add(fs, &dh->live, dir_handle_free);
	fi->fh = (uintptr_t)dh;
	fuse_reply_open(req, fi);
}

static void do_readdir(fuse_req_t req, fuse_ino_t n, size_t size, off_t off,
		       struct fuse_file_info *fi, bool plus)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *dir = kvt_inode_of(fs, n);
	struct dir_handle *dh = (struct dir_handle *)(uintptr_t)fi->fh;
	g_autoptr(GArray) notes = g_array_new(FALSE, TRUE, sizeof(struct kvt_note));
	g_autoptr(kvt_dir) d = NULL;
	g_autofree char *buf = g_malloc(size);
	size_t used = 0;

	g_mutex_lock(&dh->lock);
	if (off == 0 && dh->read) {
		/* A rewind: the names as they are now. */
		int ret;
		GArray *now = take_listing(fs, dir, &ret);

		if (!now) {
			g_mutex_unlock(&dh->lock);
			fuse_reply_err(req, -ret);
			return;
		}
		g_array_unref(dh->entries);
		dh->entries = now;
	}
	dh->read = true;
	if (plus && kvt_inode_dir(fs, dir, &d) < 0)
		plus = false; /* gone meanwhile: names only */
	for (guint i = off; i < dh->entries->len; i++) {
		struct dir_entry *de = &g_array_index(dh->entries, struct dir_entry, i);
		bool dot = !strcmp(de->name, ".") || !strcmp(de->name, "..");
		struct kvt_note note = { 0 };
		size_t len;

		if (plus) {
			struct fuse_entry_param e = { 0 };

			if (dot) {
				e.attr.st_mode = de->type << 12;
				e.attr.st_ino = de->ino;
			} else if (kvt_do_lookup(fs, dir, d, de->name, &e, &note) < 0) {
				/* Vanished since opendir, or torn; the kernel
				 * learns of a purge once this reply is out. */
				if (note.parent || note.child)
					g_array_append_val(notes, note);
				continue;
			}
			len = fuse_add_direntry_plus(req, buf + used, size - used,
						     de->name, &e, i + 1);
			if (len > size - used) {
				if (!dot)
					kvt_forget(fs, kvt_inode_of(fs, e.ino), 1);
				break;
			}
		} else {
			/* glibc hides an entry whose inode number is 0. */
			struct stat st = { .st_mode = de->type << 12, .st_ino = de->ino };

			len = fuse_add_direntry(req, buf + used, size - used, de->name,
						&st, i + 1);
			if (len > size - used)
				break;
		}
		used += len;
	}
	g_mutex_unlock(&dh->lock);
	fuse_reply_buf(req, buf, used);
	for (guint i = 0; i < notes->len; i++)
		kvt_notify(fs, &g_array_index(notes, struct kvt_note, i), false);
}

void kvt_op_readdir(fuse_req_t req, fuse_ino_t n, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	do_readdir(req, n, size, off, fi, false);
}

void kvt_op_readdirplus(fuse_req_t req, fuse_ino_t n, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	do_readdir(req, n, size, off, fi, true);
}

void kvt_op_releasedir(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct dir_handle *dh = (struct dir_handle *)(uintptr_t)fi->fh;

	kvt_live_remove(fs, &dh->live);
	dir_handle_free(fs, &dh->live);
	fuse_reply_err(req, 0);
}
