/* The door to LOWERDIR (rules in lower.h). */
#include "lower.h"
#include "fault.h"
#include "lowerr.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/vfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>

/* The directory open at @fd, whose metadata is @st when the caller has
 * it already (NULL: looked at here). */
static struct kvt_dir *dir_new(int fd, const struct stat *st, bool shown)
{
	struct kvt_dir *d = g_new0(struct kvt_dir, 1);
	struct stat own;

	d->refs = 1;
	d->fd = fd;
	g_mutex_init(&d->seen_lock);
	if (!st && fstat(fd, &own) == 0)
		st = &own;
	if (st) {
		d->dev = st->st_dev;
		d->ino = st->st_ino;
		d->seen = *st;
		/* Only what a directory of the client's tree shows is
		 * kept as seen (kvt_dir_show). */
		if (shown)
			d->seen_at = g_get_monotonic_time();
	}
	return d;
}

/* "<uid> <gid> <octal mode>" of KVT_DIR_SHOWN_XATTR put over @st; false
 * (nothing put) when @buf is not that. */
static bool parse_shown(const char *buf, ssize_t n, struct stat *st)
{
	char s[64];
	unsigned int uid, gid, mode;
	int used = 0;

	if (n <= 0 || n >= (ssize_t)sizeof(s))
		return false;
	memcpy(s, buf, n);
	s[n] = '\0';
	if (sscanf(s, "%u %u %o%n", &uid, &gid, &mode, &used) != 3 || used != n ||
	    (mode & ~07777u) || !g_ascii_isdigit(s[0]))
		return false;
	st->st_uid = uid;
	st->st_gid = gid;
	st->st_mode = (st->st_mode & S_IFMT) | mode;
	return true;
}

/* Whether a lower directory that @st describes may hold what it shows:
 * kvt_dir_set_shown makes such a one the daemon's and 0700 before it
 * writes it.  Any other is not looked at: a look is a round trip (or
 * more) to a file server, for every directory of a store. */
static bool may_show(const struct stat *st)
{
	return st->st_uid == geteuid() && (st->st_mode & 07777) == 0700;
}

/* KVT_DIR_SHOWN_XATTR of the directory at @path (a /proc/self/fd link:
 * the fd may be O_PATH), whose own metadata @st has, over @st: 1, or 0
 * when it has none. */
static int show_path(const char *path, bool follow, struct stat *st)
{
	char buf[64];
	ssize_t n;

	if (!may_show(st))
		return 0;
	n = follow ? getxattr(path, KVT_DIR_SHOWN_XATTR, buf, sizeof(buf)) :
		     lgetxattr(path, KVT_DIR_SHOWN_XATTR, buf, sizeof(buf));
	if (n < 0)
		return errno == ENODATA || errno == ENOTSUP ? 0 : -errno;
	if (!parse_shown(buf, n, st)) {
		g_warning("%s: %s of a directory is not \"<uid> <gid> <mode>\": its own owner "
			  "and mode shown", path, KVT_DIR_SHOWN_XATTR);
		return 0;
	}
	return 1;
}

static int show_fd(int fd, struct stat *st)
{
	char path[40];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return show_path(path, true, st);
}

/* What a stat of @d itself showed, kept for kvt_dir_inherit. */
static void dir_seen(struct kvt_dir *d, const struct stat *st)
{
	g_mutex_lock(&d->seen_lock);
	d->seen = *st;
	d->seen_at = g_get_monotonic_time();
	g_mutex_unlock(&d->seen_lock);
}

struct kvt_dir *kvt_dir_ref(struct kvt_dir *d)
{
	g_atomic_int_inc(&d->refs);
	return d;
}

void kvt_dir_unref(struct kvt_dir *d)
{
	if (!d || !g_atomic_int_dec_and_test(&d->refs))
		return;
	close(d->fd);
	g_mutex_clear(&d->seen_lock);
	g_free(d);
}

bool kvt_name_ok(const char *name)
{
	return name && name[0] && strcmp(name, ".") && strcmp(name, "..") &&
	       !strchr(name, '/');
}

#define CHECK_NAME(name)                      \
	do {                                  \
		if (!kvt_name_ok(name))       \
			return -EINVAL;       \
	} while (0)

/* An injected lower error (fault.h) fails the call before it is made. */
#define FAULT(op, name, name2)                                \
	do {                                                  \
		int fault_ = kvt_fault2(op, name, name2);     \
		if (fault_)                                   \
			return fault_;                        \
	} while (0)

#define FAIL(op, name) kvt_lower_failed(op, name, errno)

/* ESTALE: the file system's handle for a name went stale under it (a
 * network file system, whose other clients changed the name); the
 * kernel looked it up again once.  A call that changes nothing is made
 * again, as often: a name asked for again is looked up afresh. */
#define AGAIN_IF_STALE(call)                                               \
	({                                                                 \
		__typeof__(call) r_;                                       \
		for (int try_ = 0;; try_++) {                              \
			r_ = (call);                                       \
			if (r_ >= 0 || errno != ESTALE || try_ == 2)       \
				break;                                     \
		}                                                          \
		r_;                                                        \
	})

int kvt_dir_open_root(const char *path, struct kvt_dir **out)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	*out = dir_new(fd, NULL, false);
	return 0;
}

/* One component at a time, none of them a symbolic link: for kernels
 * without openat2. */
static int open_walk(int at, const char *relpath, int flags)
{
	g_auto(GStrv) parts = g_strsplit(relpath, "/", -1);
	int fd = dup(at);

	if (fd < 0)
		return -errno;
	for (char **p = parts; *p; p++) {
		int next;

		if (!**p)
			continue;
		if (!kvt_name_ok(*p)) {
			close(fd);
			return -EXDEV; /* what openat2 says of ".." */
		}
		next = openat(fd, *p, (p[1] ? O_RDONLY | O_DIRECTORY : flags) |
			      O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		if (next < 0)
			return -errno;
		fd = next;
	}
	return fd;
}

static int open_beneath(int at, const char *relpath, int flags)
{
	struct open_how how = {
		.flags = flags | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, at, relpath, &how, sizeof(how));

	if (fd >= 0)
		return (int)fd;
	if (errno != ENOSYS)
		return -errno;
	return open_walk(at, relpath, flags);
}

int kvt_dir_open(struct kvt_dir *at, const char *relpath, struct kvt_dir **out)
{
	int fd;

	if (!relpath[0] || relpath[0] == '/')
		return -EINVAL;
	FAULT(KVT_FAULT_OPENDIR, relpath, NULL);
	if (!kvt_name_ok(relpath)) {
		fd = open_beneath(at->fd, relpath, O_RDONLY | O_DIRECTORY);
		if (fd < 0)
			return fd;
	} else {
		fd = AGAIN_IF_STALE(openat(at->fd, relpath,
					   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
		if (fd < 0)
			return FAIL("opendir", relpath);
	}
	*out = dir_new(fd, NULL, false);
	return 0;
}

int kvt_dir_open_path(struct kvt_dir *at, const char *name, bool made, struct kvt_dir **out)
{
	struct kvt_dir *d;
	struct stat st;
	int fd, ret;

	FAULT(KVT_FAULT_OPENDIR, name, NULL);
	CHECK_NAME(name);
	/* O_DIRECTORY: a link or anything else planted there is ENOTDIR. */
	fd = AGAIN_IF_STALE(openat(at->fd, name,
				   O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
	if (fd < 0)
		return FAIL("opendir", name);
	if (fstat(fd, &st)) {
		ret = FAIL("stat", name);
		close(fd);
		return ret;
	}
	/* Just made: it shows its own; else what it says it shows. */
	ret = made ? 0 : show_fd(fd, &st);
	d = dir_new(fd, &st, ret >= 0);
	d->path_only = true;
	*out = d;
	return 0;
}

int kvt_dir_stat(struct kvt_dir *d, const char *name, struct stat *st)
{
	FAULT(KVT_FAULT_STAT, name, NULL);
	if (!name) {
		int ret;

		if (fstat(d->fd, st))
			return FAIL("stat", ".");
		ret = show_fd(d->fd, st);
		if (ret < 0)
			return kvt_lower_failed("getxattr", ".", -ret);
		dir_seen(d, st);
		return 0;
	}
	CHECK_NAME(name);
	return AGAIN_IF_STALE(fstatat(d->fd, name, st, AT_SYMLINK_NOFOLLOW)) ? FAIL("stat", name)
									      : 0;
}

int kvt_dir_hold(struct kvt_dir *d, const char *name, struct stat *st)
{
	int fd;

	FAULT(KVT_FAULT_STAT, name, NULL);
	CHECK_NAME(name);
	fd = AGAIN_IF_STALE(openat(d->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC));
	if (fd < 0 && (errno == EMFILE || errno == ENFILE))
		return -errno; /* ours, not the lower disk's: kvt_dir_stat needs none */
	if (fd < 0)
		return FAIL("stat", name);
	if (fstat(fd, st)) {
		int ret = FAIL("stat", name);

		close(fd);
		return ret;
	}
	return fd;
}

int kvt_dir_from_hold(int held, const char *name, const struct stat *st, struct kvt_dir **out)
{
	int fd;

	FAULT(KVT_FAULT_OPENDIR, name, NULL);
	if (!S_ISDIR(st->st_mode))
		return -ENOTDIR;
	fd = fcntl(held, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return -errno; /* ours, not the lower disk's */
	*out = dir_new(fd, st, true);
	(*out)->path_only = true;
	return 0;
}

/* @d open for real, for a call on the directory itself (fsync, fchmod,
 * its xattrs), which an O_PATH descriptor refuses: d->fd, or one opened
 * from it into *@own (the caller closes it). */
static int real_fd(struct kvt_dir *d, int *own)
{
	if (!d->path_only)
		return d->fd;
	*own = kvt_file_reopen(d->fd, O_RDONLY | O_DIRECTORY);
	return *own < 0 ? FAIL("opendir", ".") : *own;
}

int kvt_dir_inherit(struct kvt_dir *d, gint64 max_age_us, mode_t *mode, gid_t *gid)
{
	struct stat st;
	bool fresh;
	int ret;

	g_mutex_lock(&d->seen_lock);
	fresh = d->seen_at && g_get_monotonic_time() - d->seen_at <= max_age_us;
	*mode = d->seen.st_mode;
	*gid = d->seen.st_gid;
	g_mutex_unlock(&d->seen_lock);
	if (fresh)
		return 0;
	ret = kvt_dir_stat(d, NULL, &st);
	if (ret < 0)
		return ret;
	*mode = st.st_mode;
	*gid = st.st_gid;
	return 0;
}

int kvt_dir_links_now(struct kvt_dir *d, nlink_t *nlink)
{
	struct statx stx;

	FAULT(KVT_FAULT_STAT, NULL, NULL);
	/* Asked of the server, not of the client's cache: the kernel's
	 * CephFS client shows a directory another client just removed with
	 * its old link count for about a second. */
	if (statx(d->fd, "", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC, STATX_NLINK, &stx))
		return FAIL("stat", ".");
	*nlink = stx.stx_nlink;
	return 0;
}

int kvt_dir_seen(struct kvt_dir *d, struct stat *st)
{
	int ret = 0;

	g_mutex_lock(&d->seen_lock);
	if (d->seen_at)
		*st = d->seen;
	else
		ret = -ENODATA;
	g_mutex_unlock(&d->seen_lock);
	return ret;
}

/* Whether this process has /proc/self/fd, through which an O_PATH
 * descriptor opens for real (kvt_file_reopen). */
static bool have_proc_fd(void)
{
	static gsize known;
	static bool have;

	if (g_once_init_enter(&known)) {
		have = access("/proc/self/fd", X_OK) == 0;
		g_once_init_leave(&known, 1);
	}
	return have;
}

/* The regular file @d/@name opened with @flags (no O_CREAT), @st its
 * metadata: looked at through an O_PATH descriptor first, which opens
 * nothing, so that a device node or a FIFO planted where a record, an
 * object or a lock should be is refused without its driver's open ever
 * running (a device's open can rewind a tape, a FIFO's wait for a
 * writer); then opened from that descriptor, which holds the inode
 * looked at, whatever is put at the name meanwhile.  On a network file
 * system the calls are the same round trips as an open and a stat by
 * name: the lookup, the attributes it brought, the open. */
static int open_regular(struct kvt_dir *d, const char *name, int flags, struct stat *st)
{
	for (int stale = 0;; stale++) {
		kvt_autofd path = openat(d->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		struct stat now;
		int fd;

		if (path < 0 && errno == ESTALE && stale < 2)
			continue;
		if (path < 0)
			return FAIL("open", name);
		if (fstat(path, st))
			return FAIL("stat", name);
		if (!S_ISREG(st->st_mode))
			return -EBADMSG;
		/* Known regular: opened without O_NONBLOCK, which io_uring
		 * honours on regular files too (a read answers -EAGAIN
		 * instead of waiting for the disk). */
		if (have_proc_fd()) {
			fd = kvt_file_reopen(path, flags);
			/* ESTALE: another client removed it meanwhile; the
			 * name, looked up again, says what is there now. */
			if (fd == -ESTALE && stale < 2)
				continue;
			return fd < 0 ? kvt_lower_failed("open", name, -fd) : fd;
		}
		/* No /proc (a chroot without it): by its name again, which
		 * must still be the file looked at.  O_NONBLOCK: a FIFO
		 * swapped in between the two looks does not hang the open. */
		fd = openat(d->fd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0 && errno == ESTALE && stale < 2)
			continue;
		if (fd < 0)
			return errno == ELOOP || errno == ENXIO ? -EBADMSG : FAIL("open", name);
		if (fstat(fd, &now) || now.st_ino != st->st_ino || now.st_dev != st->st_dev ||
		    !S_ISREG(now.st_mode)) {
			close(fd);
			if (stale < 2)
				continue; /* changed between the looks: again */
			return -EBADMSG;
		}
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)) {
			int ret = FAIL("fcntl", name);

			close(fd);
			return ret;
		}
		return fd;
	}
}

int kvt_dir_open_file(struct kvt_dir *d, const char *name, int flags, mode_t mode,
		      struct stat *st)
{
	struct stat own;
	int fd;

	CHECK_NAME(name);
	FAULT(flags & O_CREAT ? KVT_FAULT_CREATE : KVT_FAULT_OPEN, name, NULL);
	if (!st)
		st = &own;
	if (!(flags & O_CREAT))
		return open_regular(d, name, flags, st);
	for (int raced = 0;; raced++) {
		if (!(flags & O_EXCL)) {
			/* There already: opened as any other. */
			fd = open_regular(d, name, flags & ~O_CREAT, st);
			if (fd != -ENOENT)
				return fd;
		}
		/* Made here with O_EXCL: a new regular file, nothing to
		 * check. */
		fd = openat(d->fd, name, flags | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd < 0 && errno == EEXIST && !(flags & O_EXCL) && raced < 8)
			continue; /* made by another meanwhile: opened */
		if (fd < 0)
			return errno == ELOOP ? -EBADMSG : FAIL("open", name);
		if (st != &own && fstat(fd, st)) {
			int ret = FAIL("stat", name);

			close(fd);
			return ret;
		}
		return fd;
	}
}

int kvt_file_reopen(int fd, int flags)
{
	char path[64];
	int nfd;

	/* Through the file's own link in /proc: no lookup of its name,
	 * which on a network file system is a round trip to the server.
	 * Never O_NOFOLLOW, which that link would refuse (ELOOP). */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	nfd = open(path, (flags & ~(O_NOFOLLOW | O_CREAT | O_EXCL)) | O_CLOEXEC);
	return nfd < 0 ? -errno : nfd;
}

int kvt_dir_mkdir(struct kvt_dir *d, const char *name, mode_t mode)
{
	CHECK_NAME(name);
	FAULT(KVT_FAULT_MKDIR, name, NULL);
	return mkdirat(d->fd, name, mode) ? FAIL("mkdir", name) : 0;
}

int kvt_dir_rmdir(struct kvt_dir *d, const char *name)
{
	CHECK_NAME(name);
	FAULT(KVT_FAULT_RMDIR, name, NULL);
	return unlinkat(d->fd, name, AT_REMOVEDIR) ? FAIL("rmdir", name) : 0;
}

int kvt_dir_unlink(struct kvt_dir *d, const char *name)
{
	CHECK_NAME(name);
	FAULT(KVT_FAULT_UNLINK, name, NULL);
	return unlinkat(d->fd, name, 0) ? FAIL("unlink", name) : 0;
}

int kvt_dir_link(struct kvt_dir *from, const char *fname, struct kvt_dir *to,
		 const char *tname)
{
	CHECK_NAME(fname);
	CHECK_NAME(tname);
	FAULT(KVT_FAULT_LINK, fname, tname);
	return linkat(from->fd, fname, to->fd, tname, 0) ? FAIL("link", fname) : 0;
}

int kvt_dir_rename(struct kvt_dir *from, const char *fname, struct kvt_dir *to,
		   const char *tname, unsigned int flags)
{
	CHECK_NAME(fname);
	CHECK_NAME(tname);
	FAULT(KVT_FAULT_RENAME, fname, tname);
	return renameat2(from->fd, fname, to->fd, tname, flags) ? FAIL("rename", fname) : 0;
}

/* The owner first, then the mode: chown(2) of a regular file takes away
 * its set-user-ID bit (and a group-executable file's set-group-ID bit),
 * even when root calls it with the owner it has, so a mode set before
 * would not be the one asked for. */
static int attrs_of_fd(int fd, const char *name, unsigned int which, mode_t mode, uid_t uid,
		       gid_t gid, const struct timespec ts[2])
{
	if ((which & (KVT_SET_UID | KVT_SET_GID)) &&
	    fchown(fd, which & KVT_SET_UID ? uid : (uid_t)-1,
		   which & KVT_SET_GID ? gid : (gid_t)-1))
		return FAIL("chown", name);
	if ((which & KVT_SET_MODE) && fchmod(fd, mode & 07777))
		return FAIL("chmod", name);
	if ((which & KVT_SET_TIMES) && futimens(fd, ts))
		return FAIL("utimens", name);
	return 0;
}

static int set_attrs(struct kvt_dir *d, const char *name, unsigned int which, mode_t mode,
		     uid_t uid, gid_t gid, const struct timespec ts[2])
{
	kvt_autofd fd = -1;
	int target;

	FAULT(KVT_FAULT_SETATTR, name, NULL);
	/* Through an fd of the file itself: fchmodat(2) would follow a
	 * symbolic link. */
	if (name) {
		fd = kvt_dir_open_file(d, name, O_RDONLY, 0, NULL);
		if (fd < 0)
			return fd;
		target = fd;
	} else {
		target = real_fd(d, &fd);
		if (target < 0)
			return target;
	}
	return attrs_of_fd(target, name, which, mode, uid, gid, ts);
}

int kvt_dir_setattr(struct kvt_dir *d, const char *name, unsigned int which,
		    mode_t mode, uid_t uid, gid_t gid, const struct timespec ts[2])
{
	int ret = set_attrs(d, name, which, mode, uid, gid, ts);
	struct stat st;

	/* What new entries inherit may have changed, even if a part failed:
	 * seen again now (a directory's attributes change seldom). */
	if (!name && kvt_dir_stat(d, NULL, &st) < 0) {
		g_mutex_lock(&d->seen_lock);
		d->seen_at = 0;
		g_mutex_unlock(&d->seen_lock);
	}
	return ret;
}

int kvt_dir_set_times(struct kvt_dir *d, const char *name, const struct timespec ts[2])
{
	CHECK_NAME(name);
	FAULT(KVT_FAULT_SETATTR, name, NULL);
	return utimensat(d->fd, name, ts, AT_SYMLINK_NOFOLLOW) ? FAIL("utimens", name) : 0;
}

/* ---------------------------------------------- calls on an open file */

int kvt_file_stat(int fd, const char *name, struct stat *st)
{
	FAULT(KVT_FAULT_STAT, name, NULL);
	return fstat(fd, st) ? FAIL("stat", name) : 0;
}

int kvt_file_setattr(int fd, const char *name, unsigned int which, mode_t mode, uid_t uid,
		     gid_t gid, const struct timespec ts[2])
{
	FAULT(KVT_FAULT_SETATTR, name, NULL);
	return attrs_of_fd(fd, name, which, mode, uid, gid, ts);
}

int kvt_file_truncate(int fd, const char *name, off_t size)
{
	FAULT(KVT_FAULT_WRITE, name, NULL);
	return ftruncate(fd, size) ? FAIL("truncate", name) : 0;
}

int kvt_file_sync(int fd, const char *name)
{
	FAULT(KVT_FAULT_SYNC, name, NULL);
	return fsync(fd) ? FAIL("fsync", name) : 0;
}

int kvt_file_datasync(int fd, const char *name)
{
	FAULT(KVT_FAULT_SYNC, name, NULL);
	return fdatasync(fd) ? FAIL("fdatasync", name) : 0;
}

int kvt_file_write_out(int fd, const char *name)
{
	FAULT(KVT_FAULT_SYNC, name, NULL);
	return sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
				       SYNC_FILE_RANGE_WAIT_AFTER) ?
	       FAIL("sync_file_range", name) : 0;
}

void kvt_file_start_writeback(int fd)
{
	sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

/* A lock another holder has is an answer, not a failure of the lower
 * file system; so is EBADF, NFS's for a flock of a file not open for
 * writing (hold.c opens it again then). */
static int lock_failed(const char *name, int err)
{
	return err == EWOULDBLOCK || err == EAGAIN || err == EACCES || err == EINTR ||
	       err == EBADF ? -err : kvt_lower_failed("lock", name, err);
}

int kvt_file_lock(int fd, const char *name)
{
	FAULT(KVT_FAULT_LOCK, name, NULL);
	return flock(fd, LOCK_EX | LOCK_NB) ? lock_failed(name, errno) : 0;
}

int kvt_file_lock_range(int fd, const char *name, off_t start, off_t len)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = start,
			    .l_len = len };

	FAULT(KVT_FAULT_LOCK, name, NULL);
	if (fcntl(fd, F_OFD_SETLK, &fl))
		return errno == EACCES ? -EAGAIN : lock_failed(name, errno);
	return 0;
}

int kvt_file_locked(int fd, const char *name)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

	FAULT(KVT_FAULT_LOCK, name, NULL);
	if (fcntl(fd, F_OFD_GETLK, &fl))
		return lock_failed(name, errno);
	return fl.l_type != F_UNLCK;
}

/* ---------------------------------------------------------------------- */

int kvt_dir_sync(struct kvt_dir *d)
{
	kvt_autofd own = -1;
	int fd;

	FAULT(KVT_FAULT_SYNC, NULL, NULL);
	fd = real_fd(d, &own);
	if (fd < 0)
		return fd;
	return fsync(fd) ? FAIL("fsync", ".") : 0;
}

int kvt_dir_sync_up(struct kvt_dir *d, struct kvt_dir *top)
{
	kvt_autofd own = -1;
	int fd = real_fd(d, &own), ret = 0;
	struct stat st, was = { 0 };

	if (fd < 0)
		return fd;
	fd = own >= 0 ? g_steal_fd(&own) : dup(fd);
	if (fd < 0)
		return -errno;
	/* ".." from a directory beneath @top stays beneath it; the walk
	 * stops at @top, or where ".." leads nowhere higher (a directory no
	 * longer under @top). */
	for (int depth = 0; depth < 4096; depth++) {
		int up;

		ret = kvt_fault(KVT_FAULT_SYNC, NULL);
		if (ret < 0)
			break;
		if (fsync(fd) || fstat(fd, &st)) {
			ret = FAIL("fsync", "..");
			break;
		}
		if ((st.st_dev == top->dev && st.st_ino == top->ino) ||
		    (st.st_dev == was.st_dev && st.st_ino == was.st_ino))
			break;
		was = st;
		up = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (up < 0) {
			ret = -errno;
			break;
		}
		close(fd);
		fd = up;
	}
	close(fd);
	return ret;
}

int kvt_dir_statvfs(struct kvt_dir *d, struct statvfs *sv)
{
	return fstatvfs(d->fd, sv) ? FAIL("statfs", ".") : 0;
}

#define NFS_MAGIC 0x6969

/* statfs(2) magic numbers (linux/magic.h and the file systems' own) of
 * lower file systems served from elsewhere. */
static const struct {
	unsigned long magic;
	const char *name;
} remote_fs[] = {
	{ NFS_MAGIC, "NFS" },
	{ 0xff534d42, "CIFS" },
	{ 0xfe534d42, "SMB2" },
	{ 0x517b, "SMB" },
	{ 0x00c36400, "CephFS" },
	{ 0x0bd00bd0, "Lustre" },
	{ 0x47504653, "GPFS (Storage Scale)" },
	{ 0x01021997, "9P" },
	{ 0x5346414f, "AFS" },
	{ 0x6b414653, "AFS" },
	{ 0x7461636f, "OCFS2" },
	{ 0x01161970, "GFS2" },
	{ 0x65735546, "FUSE (GlusterFS, sshfs, ...)" },
};

const char *kvt_dir_remote_kind(struct kvt_dir *d)
{
	struct statfs sf;

	if (fstatfs(d->fd, &sf))
		return NULL;
	for (size_t i = 0; i < G_N_ELEMENTS(remote_fs); i++)
		if ((unsigned long)sf.f_type == remote_fs[i].magic)
			return remote_fs[i].name;
	return NULL;
}

bool kvt_dir_on_nfs(struct kvt_dir *d)
{
	struct statfs sf;

	return fstatfs(d->fd, &sf) == 0 && (unsigned long)sf.f_type == NFS_MAGIC;
}

int kvt_dir_access(struct kvt_dir *d, const char *name, int mode)
{
	if (name)
		CHECK_NAME(name);
	return faccessat(d->fd, name ? name : ".", mode, AT_EACCESS | AT_SYMLINK_NOFOLLOW) ?
	       -errno : 0;
}

int kvt_dir_show(struct kvt_dir *d, const char *name, struct stat *st)
{
	g_autofree char *path = NULL;
	int ret;

	if (!name) {
		ret = show_fd(d->fd, st);
	} else {
		CHECK_NAME(name);
		path = g_strdup_printf("/proc/self/fd/%d/%s", d->fd, name);
		ret = show_path(path, false, st);
	}
	return ret < 0 ? kvt_lower_failed("getxattr", name ? name : ".", -ret) : 0;
}

int kvt_dir_set_shown(struct kvt_dir *d, unsigned int which, mode_t mode, uid_t uid,
		      gid_t gid)
{
	char buf[64];
	struct stat own, st;
	bool written;
	int ret, len;

	FAULT(KVT_FAULT_SETATTR, ".", NULL);
	if (fstat(d->fd, &own))
		return FAIL("stat", ".");
	st = own;
	ret = show_fd(d->fd, &st);
	if (ret < 0)
		return kvt_lower_failed("getxattr", ".", -ret);
	written = ret > 0;
	ret = 0;
	if (which & KVT_SET_UID)
		st.st_uid = uid;
	if (which & KVT_SET_GID)
		st.st_gid = gid;
	if (which & KVT_SET_MODE)
		st.st_mode = (st.st_mode & S_IFMT) | (mode & 07777);
	/* The daemon's own, with nothing written yet: the lower directory
	 * is the daemon's already, and shows it as it is (no call more than
	 * a chmod, where each is a round trip to a file server). */
	if (!written && st.st_uid == geteuid() && st.st_gid == getegid()) {
		ret = kvt_dir_setattr(d, NULL, which, mode, uid, gid, NULL);
	} else {
		/* Its own first, the daemon's and 0700 (may_show), once: a
		 * crash before the xattr is written leaves it closed. */
		if ((own.st_mode & 07777) != 0700 || own.st_uid != geteuid() ||
		    own.st_gid != getegid())
			ret = kvt_dir_setattr(d, NULL, KVT_SET_UID | KVT_SET_GID | KVT_SET_MODE,
					      0700, geteuid(), getegid(), NULL);
		len = snprintf(buf, sizeof(buf), "%u %u %o", (unsigned int)st.st_uid,
			       (unsigned int)st.st_gid, (unsigned int)(st.st_mode & 07777));
		if (ret == 0)
			ret = kvt_dir_setxattr(d, KVT_DIR_SHOWN_XATTR, buf, len, 0);
		if (ret == -ENOTSUP || ret == -EOPNOTSUPP)
			return kvt_dir_setattr(d, NULL, KVT_SET_UID | KVT_SET_GID | KVT_SET_MODE,
					       st.st_mode, st.st_uid, st.st_gid, NULL);
	}
	if (ret == 0)
		dir_seen(d, &st);
	return ret;
}

ssize_t kvt_dir_getxattr(struct kvt_dir *d, const char *name, void *buf, size_t size)
{
	kvt_autofd own = -1;
	int fd = real_fd(d, &own);
	ssize_t n;

	if (fd < 0)
		return fd;
	n = fgetxattr(fd, name, buf, size);
	return n < 0 ? FAIL("getxattr", name) : n;
}

int kvt_dir_setxattr(struct kvt_dir *d, const char *name, const void *value,
		     size_t size, int flags)
{
	kvt_autofd own = -1;
	int fd = real_fd(d, &own);

	if (fd < 0)
		return fd;
	return fsetxattr(fd, name, value, size, flags) ? FAIL("setxattr", name) : 0;
}

ssize_t kvt_dir_listxattr(struct kvt_dir *d, char *buf, size_t size)
{
	kvt_autofd own = -1;
	int fd = real_fd(d, &own);
	ssize_t n;

	if (fd < 0)
		return fd;
	n = flistxattr(fd, buf, size);
	return n < 0 ? FAIL("listxattr", ".") : n;
}

int kvt_dir_removexattr(struct kvt_dir *d, const char *name)
{
	kvt_autofd own = -1;
	int fd = real_fd(d, &own);

	if (fd < 0)
		return fd;
	return fremovexattr(fd, name) ? FAIL("removexattr", name) : 0;
}

static int entry_cmp(gconstpointer a, gconstpointer b)
{
	const struct kvt_dirent *x = *(struct kvt_dirent *const *)a;
	const struct kvt_dirent *y = *(struct kvt_dirent *const *)b;

	return strcmp(x->name, y->name);
}

/* A listing fails when a rule matches one of its entries (fault.h). */
static int list_fault(GPtrArray *ents)
{
	g_autofree const char **names = g_new(const char *, ents->len + 1);

	for (guint i = 0; i < ents->len; i++)
		names[i] = ((struct kvt_dirent *)ents->pdata[i])->name;
	return kvt_fault_check_names(KVT_FAULT_LIST, names, ents->len);
}

GPtrArray *kvt_dir_list(struct kvt_dir *d, bool sorted, int *err)
{
	int fd = openat(d->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	GPtrArray *out;
	struct dirent *de;

	if (!dir) {
		*err = FAIL("opendir", ".");
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	out = g_ptr_array_new_with_free_func(g_free);
	for (;;) {
		struct kvt_dirent *e;
		size_t len;

		errno = 0;
		de = readdir(dir);
		if (!de)
			break;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		len = strlen(de->d_name);
		e = g_malloc(sizeof(*e) + len + 1);
		e->ino = de->d_ino;
		e->type = de->d_type;
		memcpy(e->name, de->d_name, len + 1);
		g_ptr_array_add(out, e);
	}
	*err = errno ? FAIL("readdir", ".") : 0;
	closedir(dir);
	if (!*err && kvt_faults_on)
		*err = list_fault(out);
	if (*err) {
		g_ptr_array_unref(out);
		return NULL;
	}
	if (sorted)
		g_ptr_array_sort(out, entry_cmp);
	return out;
}

char *kvt_dir_path_below(struct kvt_dir *d, struct kvt_dir *base)
{
	char link[64], path[PATH_MAX], top[PATH_MAX];
	ssize_t n, m;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", d->fd);
	n = readlink(link, path, sizeof(path) - 1);
	snprintf(link, sizeof(link), "/proc/self/fd/%d", base->fd);
	m = readlink(link, top, sizeof(top) - 1);
	if (n < 0 || m < 0)
		return NULL;
	path[n] = top[m] = '\0';
	if (strncmp(path, top, m) || (path[m] != '/' && path[m] != '\0'))
		return NULL;
	return g_strdup(path[m] ? path + m + 1 : "");
}
