/* Symbolic links and special files: names that are a record and nothing
 * else (special.h). */
#include "special.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "name.h"
#include "resolve.h"

void kvt_make_node(fuse_req_t req, fuse_ino_t parent, const char *name,
		   struct kvt_record *rec, mode_t mode)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct kvt_inode *p = kvt_inode_of(fs, parent), *child;
	struct kvt_meta meta = { .mode = mode & 07777 };
	g_autoptr(kvt_dir) pd = NULL;
	struct kvt_note note = { 0 };
	struct fuse_entry_param e;
	int ret = strlen(name) > NAME_MAX ? -ENAMETOOLONG : kvt_inode_dir_to_make(fs, p, &pd);

	if (ret == 0) {
		kvt_new_owner(fs, pd, ctx, &meta.uid, &meta.gid);
		kvt_inode_lock(p);
		child = g_hash_table_lookup(p->children, name);
		/* A file being written here has no lower entry yet. */
		ret = child && kvt_inode_is_local(child) ? -EEXIST :
		      kvt_name_create(fs->store, pd, name, rec, &meta);
		kvt_inode_unlock(p);
	}
	if (ret == 0)
		ret = kvt_do_lookup(fs, p, pd, name, &e, &note);
	if (ret < 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_entry(req, &e);
	kvt_notify(fs, &note, false);
	kvt_record_clear(rec);
}

void kvt_make_special(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      dev_t rdev)
{
	struct kvt_record rec;
	int kind = kvt_kind_of_mode(mode);

	if (kind <= KVT_KIND_FILE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	kvt_record_init(&rec);
	rec.kind = kind;
	if (kind == KVT_KIND_CHR || kind == KVT_KIND_BLK)
		rec.rdev = rdev;
	kvt_make_node(req, parent, name, &rec, mode);
}
