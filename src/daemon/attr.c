/* setattr: size (a new version), mode, owner, times.  A file's metadata
 * lives in its record (record.h), a directory's on the lower directory;
 * files not yet published keep it in memory until their record is
 * written. */
#include <errno.h>
#include <string.h>

#include "handle.h"
#include "ops.h"
#include "resolve.h"
#include "version.h"

/* Which lower fields @to_set changes. */
static unsigned int lower_fields(int to_set)
{
	return (to_set & FUSE_SET_ATTR_MODE ? KVT_SET_MODE : 0) |
	       (to_set & FUSE_SET_ATTR_UID ? KVT_SET_UID : 0) |
	       (to_set & FUSE_SET_ATTR_GID ? KVT_SET_GID : 0) |
	       (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME) ? KVT_SET_TIMES : 0);
}

/* A directory's times are its lower directory's; its owner and mode are
 * what it shows (kvt_dir_set_shown). */
static int set_dir(struct kvt_fs *fs, struct kvt_inode *ino, const struct stat *attr,
		   int to_set, const struct timespec ts[2])
{
	g_autoptr(kvt_dir) d = NULL;
	unsigned int which = lower_fields(to_set);
	int ret = kvt_inode_dir(fs, ino, &d);

	if (ret == 0 && (which & KVT_SET_TIMES))
		ret = kvt_dir_setattr(d, NULL, KVT_SET_TIMES, 0, 0, 0, ts);
	if (ret == 0 && (which & ~KVT_SET_TIMES))
		ret = kvt_dir_set_shown(d, which & ~KVT_SET_TIMES, attr->st_mode, attr->st_uid,
					attr->st_gid);
	return ret;
}

/* A published file's owner or mode: its record rewritten (they are the
 * record's), with the inode's times put on the new record file, whose
 * number and ctime the inode takes.  @was is what the inode showed
 * before, put back if it fails.  Caller holds the parent's lock, not
 * @ino's. */
static int set_record(struct kvt_fs *fs, struct kvt_inode *ino, struct kvt_dir *pd,
		      const struct stat *was)
{
	struct kvt_record rec;
	struct kvt_meta meta;
	struct stat st;
	int ret;

	kvt_record_init(&rec);
	kvt_inode_lock(ino);
	kvt_record_copy(&rec, &ino->rec);
	meta = kvt_inode_meta(ino, true);
	kvt_inode_unlock(ino);
	ret = kvt_store_rewrite(fs->store, pd, ino->name, &rec, &meta, &st);
	kvt_record_clear(&rec);
	kvt_inode_lock(ino);
	if (ret == 0 && st.st_ino) {
		/* Taken, or the next resolve would read the new record file
		 * again for a change that is ours. */
		ino->rec_ino = ino->st_ino = st.st_ino; /* see inode.c */
		ino->rec_ctime = ino->meta.st_ctim = st.st_ctim;
	} else if (ret < 0 && ret != -ESTALE) {
		ino->meta.st_mode = was->st_mode;
		ino->meta.st_uid = was->st_uid;
		ino->meta.st_gid = was->st_gid;
	}
	kvt_inode_unlock(ino);
	/* ESTALE: another mount replaced the version meanwhile: there is
	 * nothing of this one to change. */
	return ret == -ESTALE ? -ENOENT : ret;
}

static int set_file(struct kvt_fs *fs, struct kvt_inode *ino, const struct stat *attr,
		    int to_set, const struct timespec ts[2])
{
	struct kvt_inode *p;
	struct kvt_dir *pd;
	struct stat st, was;
	bool on_disk;
	int ret;

	p = kvt_lock_parent(fs, ino, &pd, &ret);
	if (ret < 0)
		return ret;
	kvt_inode_lock(ino);
	on_disk = ino->has_record && p;
	was = ino->meta;
	if (to_set & FUSE_SET_ATTR_MODE)
		ino->meta.st_mode = (ino->meta.st_mode & S_IFMT) | (attr->st_mode & 07777);
	if (to_set & FUSE_SET_ATTR_UID)
		ino->meta.st_uid = attr->st_uid;
	if (to_set & FUSE_SET_ATTR_GID)
		ino->meta.st_gid = attr->st_gid;
	if (!on_disk) {
		if (to_set & FUSE_SET_ATTR_ATIME)
			ino->meta.st_atim = ts[0];
		if (to_set & FUSE_SET_ATTR_MTIME)
			ino->meta.st_mtim = ts[1];
		/* Kept by the record at publication (cp -a and tar set them
		 * before the close that publishes). */
		if (to_set & FUSE_SET_ATTR_ATIME)
			ino->times_set |= KVT_CLIENT_ATIME;
		if (to_set & FUSE_SET_ATTR_MTIME)
			ino->times_set |= KVT_CLIENT_MTIME;
		if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID |
			      FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))
			clock_gettime(CLOCK_REALTIME, &ino->meta.st_ctim);
	}
	kvt_inode_unlock(ino);
	if (!on_disk)
		goto out;
	/* Times first, on the record file as it is: the rewrite that an
	 * owner or mode makes puts them on the new one. */
	ret = to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME) ?
		      kvt_dir_set_times(pd, ino->name, ts) : 0;
	if (ret == 0 && kvt_dir_stat(pd, ino->name, &st) == 0) {
		kvt_inode_lock(ino);
		ino->meta.st_atim = st.st_atim;
		ino->meta.st_mtim = st.st_mtim;
		ino->meta.st_ctim = st.st_ctim;
		ino->rec_ctime = st.st_ctim;
		kvt_inode_unlock(ino);
	}
	if (ret == 0 && (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
		ret = set_record(fs, ino, pd, &was);
	if (ret == -ENOENT)
		ret = 0; /* another mount removed it: nothing to change */
out:
	if (p)
		kvt_inode_unlock(p);
	kvt_dir_unref(pd);
	return ret;
}

void kvt_op_setattr(fuse_req_t req, fuse_ino_t n, struct stat *attr, int to_set,
		    struct fuse_file_info *fi)
{
	struct kvt_fs *fs = kvt_fs_of(req);
	struct kvt_inode *ino = kvt_inode_of(fs, n);
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT } }, now;
	int ret = 0;

	if (to_set & FUSE_SET_ATTR_SIZE) {
		struct kvt_stage **wstage = fi ? kvt_handle_wstage(fi) :
					   attr->st_size == 0 ?
					   kvt_handle_trunc(ino, fuse_req_ctx(req)->pid) : NULL;

		if (ino->is_dir) {
			fuse_reply_err(req, EISDIR);
			return;
		}
		struct timespec was_m, was_c;

		kvt_inode_lock(ino);
		ret = ino->has_record && ino->rec.kind != KVT_KIND_FILE ? -EINVAL : 0;
		/* A truncate changes the data: mtime and ctime are now, set
		 * before the publication it may make keeps ctime (version.c),
		 * and put back if it fails. */
		was_m = ino->meta.st_mtim;
		was_c = ino->meta.st_ctim;
		if (ret == 0) {
			clock_gettime(CLOCK_REALTIME, &ino->meta.st_ctim);
			ino->meta.st_mtim = ino->meta.st_ctim;
		}
		kvt_inode_unlock(ino);
		if (ret < 0)
			goto out; /* a link or a special file has no bytes */
		/* open(O_RDONLY | O_TRUNC) truncates through a reader's
		 * handle: that is a truncate by path. */
		ret = kvt_version_set_size(fs, ino, attr->st_size, wstage,
					   fuse_req_ctx(req)->pid, fuse_req_ctx(req)->uid);
		kvt_inode_lock(ino);
		if (ret < 0) {
			ino->meta.st_mtim = was_m;
			ino->meta.st_ctim = was_c;
		} else {
			ino->times_set = 0; /* the version changed after them */
		}
		kvt_inode_unlock(ino);
		if (ret < 0)
			goto out;
	}
	/* "Now" is read here, not left to the lower file system, whose
	 * clock is the coarse one: a time set now must not come out older
	 * than the caller's own clock just before the call. */
	clock_gettime(CLOCK_REALTIME, &now);
	if (to_set & FUSE_SET_ATTR_ATIME)
		ts[0] = to_set & FUSE_SET_ATTR_ATIME_NOW ? now : attr->st_atim;
	if (to_set & FUSE_SET_ATTR_MTIME)
		ts[1] = to_set & FUSE_SET_ATTR_MTIME_NOW ? now : attr->st_mtim;
	if (lower_fields(to_set))
		ret = ino->is_dir ? set_dir(fs, ino, attr, to_set, ts) :
				    set_file(fs, ino, attr, to_set, ts);
out:
	kvt_reply_attr(req, fs, ino, ret);
}
