/* The one door to LOWERDIR.
 *
 * Every lower path goes through here, as a held directory (struct
 * kvt_dir) and one name in it.  A name is one path component: never
 * empty, ".", ".." or containing '/'.  Nothing is reached through a
 * symbolic link: names are opened with O_NOFOLLOW, paths of several
 * components with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) (one
 * O_NOFOLLOW component at a time where openat2 is missing), and where a
 * regular file is expected anything else is refused without being opened
 * (an O_PATH look first): a FIFO or a device node planted there never has
 * its open run.  So whatever a hostile or damaged lower directory holds, nothing
 * outside LOWERDIR is read, written or removed.
 *
 * Errors are -errno; -EBADMSG means "there, but not a regular file" where
 * one was expected. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

/* A lower directory held open, shared by reference. */
typedef struct kvt_dir {
	gint refs;
	int fd;
	bool path_only;   /* fd is O_PATH (kvt_dir_from_hold): a dirfd for the
			   * *at calls; the few calls on the directory itself
			   * open it for real */
	dev_t dev;
	ino_t ino;
	/* Its own metadata as last seen (its owner, group and mode those
	 * it shows: kvt_dir_show), and when (0: never). */
	GMutex seen_lock;
	struct stat seen;
	gint64 seen_at;
} kvt_dir;

struct kvt_dir *kvt_dir_ref(struct kvt_dir *d);
void kvt_dir_unref(struct kvt_dir *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(kvt_dir, kvt_dir_unref)

/* An fd closed when it goes out of scope. */
static inline void kvt_close_fdp(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}
#define kvt_autofd __attribute__((cleanup(kvt_close_fdp))) int

/* A name that is one path component. */
bool kvt_name_ok(const char *name);

/* LOWERDIR itself, as the user named it. */
int kvt_dir_open_root(const char *path, struct kvt_dir **out);
/* @relpath (one or more components) beneath @at. */
int kvt_dir_open(struct kvt_dir *at, const char *relpath, struct kvt_dir **out);

/* @name in @d, or @d itself when @name is NULL. */
int kvt_dir_stat(struct kvt_dir *d, const char *name, struct stat *st);
/* @d's link count as its file server has it now (0: removed). */
int kvt_dir_links_now(struct kvt_dir *d, nlink_t *nlink);
/* kvt_dir_open of the one name @name, held by an O_PATH descriptor
 * (kvt_dir_from_hold says why): for a directory of the client's tree,
 * whose metadata as shown (kvt_dir_show) is kept as seen; @made: it was
 * just made, and shows its own. */
int kvt_dir_open_path(struct kvt_dir *at, const char *name, bool made, struct kvt_dir **out);
/* @name in @d, held by an O_PATH descriptor (returned), which opens
 * nothing (a FIFO or a device planted there stays shut); @st gets its
 * metadata.  What it is, a directory or a regular file, is then kept
 * by it (kvt_dir_from_hold) or opened from it (kvt_file_reopen) without
 * a look at its name: on a network file system one round trip where a
 * stat by name and an open by name are two. */
int kvt_dir_hold(struct kvt_dir *d, const char *name, struct stat *st);
/* The directory @name held at @held (kvt_dir_hold), @st its metadata as
 * shown (kvt_dir_show):
 * the hold itself, not an open of the directory.  Every call on names in
 * it takes an O_PATH descriptor as its directory; an open by
 * /proc/self/fd would cost a network file system two round trips more
 * (the permission check's attributes, and the open). */
int kvt_dir_from_hold(int held, const char *name, const struct stat *st, struct kvt_dir **out);
/* @d's own mode and group, which a new entry in it may inherit, as seen
 * at most @max_age_us ago (looked at again when older: on a network
 * file system each look is a round trip).  A change made through @d
 * (kvt_dir_setattr) is seen at once. */
int kvt_dir_inherit(struct kvt_dir *d, gint64 max_age_us, mode_t *mode, gid_t *gid);
/* @d's own metadata as last seen (when it was opened, or since);
 * -ENODATA if it never was. */
int kvt_dir_seen(struct kvt_dir *d, struct stat *st);
/* Opens the regular file @name (flags as open(2), O_CREAT allowed);
 * @st (may be NULL) gets its metadata.  What is there is looked at
 * through an O_PATH descriptor and opened from it only if it is a
 * regular file (-EBADMSG else); a file made here (O_CREAT) needs no
 * look. */
int kvt_dir_open_file(struct kvt_dir *d, const char *name, int flags, mode_t mode,
		      struct stat *st);
/* The file open at @fd opened again with @flags (O_WRONLY, O_DIRECT...),
 * without looking its name up: it cannot be another file. */
int kvt_file_reopen(int fd, int flags);
int kvt_dir_mkdir(struct kvt_dir *d, const char *name, mode_t mode);
int kvt_dir_rmdir(struct kvt_dir *d, const char *name);
int kvt_dir_unlink(struct kvt_dir *d, const char *name);
/* A hard link; symbolic links are linked as what they are, never followed. */
int kvt_dir_link(struct kvt_dir *from, const char *fname, struct kvt_dir *to,
		 const char *tname);
/* renameat2(2) with @flags (RENAME_NOREPLACE, RENAME_EXCHANGE). */
int kvt_dir_rename(struct kvt_dir *from, const char *fname, struct kvt_dir *to,
		   const char *tname, unsigned int flags);

/* Metadata of @name (a regular file) or of @d itself (@name NULL).
 * Which fields: KVT_SET_* bits. */
enum {
	KVT_SET_MODE = 1 << 0,
	KVT_SET_UID = 1 << 1,
	KVT_SET_GID = 1 << 2,
	KVT_SET_TIMES = 1 << 3, /* ts[0] atime, ts[1] mtime; UTIME_OMIT allowed */
};
int kvt_dir_setattr(struct kvt_dir *d, const char *name, unsigned int which,
		    mode_t mode, uid_t uid, gid_t gid, const struct timespec ts[2]);

/* A directory's owner, group and mode (store format 2) are what it
 * shows, written in an xattr of the lower directory, which is root's and
 * 0700 whoever owns the name: "<uid> <gid> <octal mode>".  A directory
 * without one (made before format 2, or where the file system has no
 * user xattrs) shows its own.  Clients never see nor set it (OWN_PREFIX). */
#define KVT_DIR_SHOWN_XATTR "user.kvtierfs.dir"

/* Puts over @st, the stat of the directory @d (@name NULL) or of the
 * directory @d/@name, the owner, group and mode it shows; 0 also when it
 * has none of its own, -errno when they cannot be read. */
int kvt_dir_show(struct kvt_dir *d, const char *name, struct stat *st);
/* Makes the directory @d show @which (KVT_SET_UID, _GID, _MODE) of @mode,
 * @uid, @gid, and the rest of what it shows now, in one setxattr; the
 * lower directory is made root's and 0700 the first time.  Where the file
 * system has no user xattrs, @d's own owner and mode are set instead. */
int kvt_dir_set_shown(struct kvt_dir *d, unsigned int which, mode_t mode, uid_t uid,
		      gid_t gid);

/* The times of @name itself, whatever it is (never through a symbolic
 * link): one call, where kvt_dir_setattr opens the file first. */
int kvt_dir_set_times(struct kvt_dir *d, const char *name, const struct timespec ts[2]);

/* Calls on a lower file open at @fd (kvt_dir_open_file): each checks its
 * fault point first, as every call of the door does.  @name is the file's
 * name in its directory, what a fault rule matches and a failure's log
 * line says (NULL where the caller has none: no name= rule matches). */
/* fstat(2); fault op stat. */
int kvt_file_stat(int fd, const char *name, struct stat *st);
/* kvt_dir_setattr's fields on the open file; fault op setattr. */
int kvt_file_setattr(int fd, const char *name, unsigned int which, mode_t mode, uid_t uid,
		     gid_t gid, const struct timespec ts[2]);
/* ftruncate(2); fault op write. */
int kvt_file_truncate(int fd, const char *name, off_t size);
/* fsync(2), fdatasync(2); fault op sync. */
int kvt_file_sync(int fd, const char *name);
int kvt_file_datasync(int fd, const char *name);
/* The file's bytes written out and waited for (sync_file_range(2)): on a
 * journaling file system they are in the running transaction, but no
 * commit is waited for; fault op sync. */
int kvt_file_write_out(int fd, const char *name);
/* Starts writing the file's bytes out and waits for nothing: a hint,
 * whose failure changes nothing, so no fault point either. */
void kvt_file_start_writeback(int fd);
/* An exclusive flock(2), tried once: 0, or -EWOULDBLOCK while another
 * holds it; fault op lock. */
int kvt_file_lock(int fd, const char *name);
/* An open file description's write lock on @len bytes from @start (0: to
 * the end, however long the file grows): 0, or -EAGAIN while another
 * holds one; fault op lock. */
int kvt_file_lock_range(int fd, const char *name, off_t start, off_t len);
/* Whether another open file description holds a write lock on the file:
 * 1, 0, or -errno; fault op lock. */
int kvt_file_locked(int fd, const char *name);

/* Flushes the directory's entries to stable storage. */
int kvt_dir_sync(struct kvt_dir *d);
/* Flushes @d and every directory above it up to @top, @top included:
 * the entries on the path to a name. */
int kvt_dir_sync_up(struct kvt_dir *d, struct kvt_dir *top);
int kvt_dir_statvfs(struct kvt_dir *d, struct statvfs *sv);

/* The kind of file system @d is on when its bytes are served from
 * elsewhere (NFS, CephFS, a FUSE file system such as GlusterFS...), whose
 * size and times need not change when the bytes do; NULL for a local
 * one. */
const char *kvt_dir_remote_kind(struct kvt_dir *d);
/* Whether @d is on NFS, whose client renames a file unlinked (or renamed
 * over) while it has it open to ".nfs<hex>" in the same directory, until
 * the last close: an unlink there leaves the link count as it was. */
bool kvt_dir_on_nfs(struct kvt_dir *d);
/* access(2) for the daemon's own identity: W_OK etc. */
int kvt_dir_access(struct kvt_dir *d, const char *name, int mode);

/* Extended attributes of the directory @d itself. */
ssize_t kvt_dir_getxattr(struct kvt_dir *d, const char *name, void *buf, size_t size);
int kvt_dir_setxattr(struct kvt_dir *d, const char *name, const void *value,
		     size_t size, int flags);
ssize_t kvt_dir_listxattr(struct kvt_dir *d, char *buf, size_t size);
int kvt_dir_removexattr(struct kvt_dir *d, const char *name);

/* One entry of a listing: inode number, DT_* type (DT_UNKNOWN where the
 * file system does not say) and name. */
struct kvt_dirent {
	ino_t ino;
	unsigned char type;
	char name[];
};
/* The entries of @d but "." and "..", in directory order (@sorted:
 * by name); NULL with *@err set on failure.  The listing is read through
 * a file description of its own, so @d may be used meanwhile. */
GPtrArray *kvt_dir_list(struct kvt_dir *d, bool sorted, int *err);

/* The path of @d below @base ("" for @base itself; NULL when @d is not
 * under it any more), for messages. */
char *kvt_dir_path_below(struct kvt_dir *d, struct kvt_dir *base);
