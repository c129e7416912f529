/* The lower object store.
 *
 * Layout of LOWERDIR:
 *   kvtierfs-store            format marker: "kvtierfs-store <version>"
 *   objects/<ab>/<hash>       anchor: one link per distinct content, for dedup
 *   objects/<ab>/<hash>.<ref> reference: one hard link per name record
 *   names/<visible path>      name records (record.h) and directories
 *   staging/<mount id>/       one mount's unpublished files, with "lock"
 *
 * Why references are hard links: several mounts on several hosts may share
 * LOWERDIR (NFS, CephFS), so no mount may keep the only count of who uses
 * an object.  Each record owns its own link to the object's inode; the
 * kernel's link count is the reference count and is updated atomically by
 * link/unlink.  A record reads its own reference, so when the anchor is
 * unlinked by one mount while another dedups against it, the second mount
 * still holds the bytes through its reference (only dedup is lost).
 *
 * Publication of one file, each step a single atomic lower operation:
 *   1. bytes are written to staging/<id>/d.<n>
 *   2. link anchor -> reference (dedup), or link staging file ->
 *      reference and link reference -> anchor (new content)
 *   3. record written to staging/<id>/r.<n>, then renamed over the name
 *      (RENAME_NOREPLACE, or RENAME_EXCHANGE to learn exactly which record
 *      was replaced so its reference is released); then the staged file
 *      goes.  If 3 fails, the reference goes instead and the staged file
 *      is published again by the next attempt.
 * Crash analysis (kill -9 of the daemon; page cache survives):
 *   - before 3: the name is untouched (absent or the old record); the
 *     staged file and, after 2, an unreferenced object remain.  The next
 *     mount removes the dead staging directory; the unreferenced object is
 *     found and removed by kvtierfs-fsck --repair.
 *   - after 3: the name is the new record and points at a complete object;
 *     at worst the replaced record's object is left unreferenced (fsck).
 *   No step ever leaves a name pointing at a partial object.
 * Power loss: nothing is fsynced (the clients do not ask for it), so a
 * record may survive while its object's bytes do not; that is what the
 * size check at resolve and the hash check before serving are for.
 *
 * Staging ownership without lock files: a mount holds an OFD write lock on
 * staging/<id>/lock for its lifetime.  The kernel (or the NFS server, at
 * lease expiry) drops it when the mount dies, so a new mount removes every
 * staging directory whose lock it can take. */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define LOCK_NAME "lock"

static int errno_or(int fallback)
{
	return errno ? -errno : -fallback;
}

static int take_lock(int fd)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

	return fcntl(fd, F_OFD_SETLK, &fl) ? -errno : 0;
}

/* Removes the files of a flat staging directory, then the directory. */
static int remove_stage_dir(int parentfd, const char *name)
{
	int fd = openat(parentfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	DIR *d;
	struct dirent *de;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		unlinkat(fd, de->d_name, 0);
	}
	closedir(d);
	return unlinkat(parentfd, name, AT_REMOVEDIR) ? -errno : 0;
}

static guint remove_dead_stages(int stagesfd)
{
	int fd = dup(stagesfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	guint removed = 0;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while ((de = readdir(d))) {
		g_autofree char *lock = NULL;
		int lfd;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		lock = g_strdup_printf("%s/" LOCK_NAME, de->d_name);
		lfd = openat(stagesfd, lock, O_RDWR | O_NOFOLLOW);
		if (lfd >= 0 && take_lock(lfd) < 0) {
			close(lfd); /* a live mount's */
			continue;
		}
		if (lfd >= 0)
			close(lfd);
		if (remove_stage_dir(stagesfd, de->d_name) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}

static bool dir_is_empty_store_candidate(int fd)
{
	int dfd = dup(fd);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;
	bool empty = true;

	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return false;
	}
	while ((de = readdir(d))) {
		/* A fresh ext4 file system has lost+found. */
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    strcmp(de->d_name, "lost+found")) {
			empty = false;
			break;
		}
	}
	closedir(d);
	return empty;
}

static int read_marker(int lowerfd, int *version)
{
	char buf[64];
	int fd = openat(lowerfd, KVT_MARKER, O_RDONLY | O_NOFOLLOW);
	ssize_t n = 0;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	if (sscanf(buf, KVT_MARKER " %d", version) != 1)
		return -EBADMSG;
	return 0;
}

static int create_store(int lowerfd)
{
	static const char *const dirs[] = { "objects", "names", "staging" };
	char buf[64];
	int fd, len;

	for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++)
		if (mkdirat(lowerfd, dirs[i], 0755) && errno != EEXIST)
			return -errno;
	/* The marker goes last, by rename: a store is either marked and
	 * complete, or an empty-looking directory that the next mount
	 * completes. */
	fd = openat(lowerfd, KVT_MARKER ".new", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -errno;
	len = snprintf(buf, sizeof(buf), KVT_MARKER " %d\n", KVT_FORMAT_VERSION);
	if (write(fd, buf, len) != len) {
		int ret = errno_or(EIO);

		close(fd);
		unlinkat(lowerfd, KVT_MARKER ".new", 0);
		return ret;
	}
	close(fd);
	if (renameat(lowerfd, KVT_MARKER ".new", lowerfd, KVT_MARKER))
		return -errno;
	return 0;
}

static int make_stage(struct kvt_store *s, int stagesfd)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		char host[64] = "host";
		g_autofree char *lock = NULL;

		gethostname(host, sizeof(host) - 1);
		g_free(s->mount_id);
		s->mount_id = g_strdup_printf("%s.%d.%08x%08x", host, getpid(),
					      g_random_int(), g_random_int());
		if (mkdirat(stagesfd, s->mount_id, 0700)) {
			if (errno == EEXIST)
				continue;
			return -errno;
		}
		s->stagefd = openat(stagesfd, s->mount_id, O_RDONLY | O_DIRECTORY);
		if (s->stagefd < 0)
			return -errno;
		s->lockfd = openat(s->stagefd, LOCK_NAME, O_RDWR | O_CREAT | O_EXCL, 0600);
		/* A mount starting at the same instant may have taken our
		 * lockless directory for a dead one: start over. */
		if (s->lockfd < 0 || take_lock(s->lockfd) < 0) {
			if (s->lockfd >= 0)
				close(s->lockfd);
			close(s->stagefd);
			s->lockfd = s->stagefd = -1;
			continue;
		}
		s->stage_path = g_strdup_printf("staging/%s", s->mount_id);
		return 0;
	}
	return -EAGAIN;
}

struct kvt_store *kvt_store_open(const char *lowerdir, GError **err)
{
	struct kvt_store *s = g_new0(struct kvt_store, 1);
	int version, ret, stagesfd = -1;

	s->lowerfd = s->objfd = s->namesfd = s->stagefd = s->lockfd = -1;
	s->lowerfd = open(lowerdir, O_RDONLY | O_DIRECTORY);
	if (s->lowerfd < 0) {
		g_set_error(err, G_FILE_ERROR, g_file_error_from_errno(errno),
			    "LOWERDIR %s: %s", lowerdir, g_strerror(errno));
		goto fail;
	}
	ret = read_marker(s->lowerfd, &version);
	if (ret == -ENOENT) {
		if (!dir_is_empty_store_candidate(s->lowerfd)) {
			g_set_error(err, G_FILE_ERROR, G_FILE_ERROR_EXIST,
				    "LOWERDIR %s is not empty and not a kvtierfs store (no %s)",
				    lowerdir, KVT_MARKER);
			goto fail;
		}
		ret = create_store(s->lowerfd);
		if (ret == 0)
			ret = read_marker(s->lowerfd, &version);
	}
	if (ret < 0) {
		g_set_error(err, G_FILE_ERROR, g_file_error_from_errno(-ret),
			    "LOWERDIR %s: cannot use store: %s", lowerdir,
			    g_strerror(-ret));
		goto fail;
	}
	if (version != KVT_FORMAT_VERSION) {
		g_set_error(err, G_FILE_ERROR, G_FILE_ERROR_INVAL,
			    "LOWERDIR %s: store format %d, this kvtierfs reads format %d",
			    lowerdir, version, KVT_FORMAT_VERSION);
		goto fail;
	}
	s->objfd = openat(s->lowerfd, "objects", O_RDONLY | O_DIRECTORY);
	s->namesfd = openat(s->lowerfd, "names", O_RDONLY | O_DIRECTORY);
	stagesfd = openat(s->lowerfd, "staging", O_RDONLY | O_DIRECTORY);
	if (s->objfd < 0 || s->namesfd < 0 || stagesfd < 0) {
		g_set_error(err, G_FILE_ERROR, g_file_error_from_errno(errno),
			    "LOWERDIR %s: damaged store: %s", lowerdir, g_strerror(errno));
		goto fail;
	}
	if (faccessat(s->lowerfd, "staging", W_OK, AT_EACCESS)) {
		g_set_error(err, G_FILE_ERROR, g_file_error_from_errno(errno),
			    "LOWERDIR %s: not writable: %s", lowerdir, g_strerror(errno));
		goto fail;
	}
	s->stale_removed = remove_dead_stages(stagesfd);
	ret = make_stage(s, stagesfd);
	if (ret < 0) {
		g_set_error(err, G_FILE_ERROR, g_file_error_from_errno(-ret),
			    "LOWERDIR %s: cannot create staging: %s", lowerdir,
			    g_strerror(-ret));
		goto fail;
	}
	close(stagesfd);
	return s;
fail:
	if (stagesfd >= 0)
		close(stagesfd);
	kvt_store_close(s);
	return NULL;
}

void kvt_store_close(struct kvt_store *s)
{
	if (!s)
		return;
	if (s->stagefd >= 0) {
		int stagesfd = openat(s->lowerfd, "staging", O_RDONLY | O_DIRECTORY);

		if (stagesfd >= 0) {
			remove_stage_dir(stagesfd, s->mount_id);
			close(stagesfd);
		}
		close(s->stagefd);
	}
	if (s->lockfd >= 0)
		close(s->lockfd);
	if (s->objfd >= 0)
		close(s->objfd);
	if (s->namesfd >= 0)
		close(s->namesfd);
	if (s->lowerfd >= 0)
		close(s->lowerfd);
	g_free(s->mount_id);
	g_free(s->stage_path);
	g_free(s);
}

static char *stage_name(struct kvt_store *s, char kind)
{
	return g_strdup_printf("%c.%" G_GINT64_MODIFIER "x", kind,
			       (guint64)__atomic_fetch_add(&s->seq, 1, __ATOMIC_RELAXED));
}

int kvt_stage_create(struct kvt_store *s, int *fd_out, char **name_out)
{
	for (;;) {
		char *name = stage_name(s, 'd');
		int fd = openat(s->stagefd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

		if (fd >= 0) {
			*fd_out = fd;
			*name_out = name;
			return 0;
		}
		g_free(name);
		if (errno != EEXIST)
			return -errno;
	}
}

void kvt_stage_discard(struct kvt_store *s, const char *name)
{
	unlinkat(s->stagefd, name, 0);
}

static int ensure_fanout(struct kvt_store *s, const char *relpath)
{
	char dir[3] = { relpath[0], relpath[1], '\0' };

	if (mkdirat(s->objfd, dir, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

static void new_ref(struct kvt_store *s, char ref[KVT_REF_MAX])
{
	g_autofree char *n = stage_name(s, 'r');

	/* Unique across mounts: random mount token plus a local sequence. */
	g_snprintf(ref, KVT_REF_MAX, "%.8s%s", s->mount_id + strlen(s->mount_id) - 8,
		   n + 2);
}

int kvt_object_publish(struct kvt_store *s, int stage_fd, const char *stage_name_,
		       uint64_t size, struct kvt_record *rec)
{
	kvt_hash h;
	int ret = kvt_hash_fd(stage_fd, size, &h);

	if (ret == -ENODATA)
		ret = -EIO; /* the staged file lost bytes */
	if (ret == 0)
		ret = kvt_object_publish_hashed(s, stage_name_, size, &h, rec);
	return ret;
}

int kvt_object_publish_hashed(struct kvt_store *s, const char *stage_name_,
			      uint64_t size, const kvt_hash *hash,
			      struct kvt_record *rec)
{
	g_autofree char *anchor = NULL;
	g_autofree char *refp = NULL;
	struct stat st;
	int ret;

	rec->hash = *hash;
	rec->size = size;
	new_ref(s, rec->ref);
	anchor = kvt_object_anchor_path(&rec->hash);
	refp = kvt_object_ref_path(&rec->hash, rec->ref);

	/* Same content already stored: share its inode. */
	if (linkat(s->objfd, anchor, s->objfd, refp, 0) == 0) {
		if (fstatat(s->objfd, refp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    (uint64_t)st.st_size == size) {
			if (s->stats)
				kvt_stat_add(s->stats, KVT_STAT_dedups, 1);
			return 0;
		}
		/* Same hash, other size: the anchor is torn (or a collision);
		 * never share it. */
		unlinkat(s->objfd, refp, 0);
		unlinkat(s->objfd, anchor, 0);
	} else if (errno != ENOENT && errno != EMLINK) {
		/* EMLINK: the shared inode has all the links its file system
		 * allows (65000 on ext4); these bytes get an object of their
		 * own. */
		return -errno;
	}

	ret = ensure_fanout(s, refp);
	if (ret < 0)
		return ret;
	/* A link, not a rename: until a record names the object, the staged
	 * file is still the version's, and a failed record install leaves
	 * it to be published again. */
	if (linkat(s->stagefd, stage_name_, s->objfd, refp, 0))
		return -errno;
	if (s->stats) {
		kvt_stat_add(s->stats, KVT_STAT_objects, 1);
		kvt_stat_add(s->stats, KVT_STAT_bytes_stored, size);
	}
	/* Another mount may have made the anchor meanwhile: then these bytes
	 * simply are not shared. */
	if (linkat(s->objfd, refp, s->objfd, anchor, 0) && errno != EEXIST)
		g_debug("anchor %s: %s", anchor, g_strerror(errno));
	return 0;
}

int kvt_object_release(struct kvt_store *s, const struct kvt_record *rec)
{
	g_autofree char *anchor = kvt_object_anchor_path(&rec->hash);
	g_autofree char *refp = kvt_object_ref_path(&rec->hash, rec->ref);
	struct stat st;
	int ret = 0;

	if (unlinkat(s->objfd, refp, 0) && errno != ENOENT)
		ret = -errno;
	/* Only the anchor left: nobody uses these bytes.  A mount that links
	 * to the anchor after this check holds its own reference. */
	if (fstatat(s->objfd, anchor, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_nlink == 1)
		unlinkat(s->objfd, anchor, 0);
	return ret;
}

int kvt_object_open(struct kvt_store *s, const struct kvt_record *rec, int flags)
{
	g_autofree char *refp = kvt_object_ref_path(&rec->hash, rec->ref);
	int fd = openat(s->objfd, refp, flags | O_CLOEXEC | O_NOFOLLOW);

	return fd < 0 ? -errno : fd;
}

int kvt_object_stat(struct kvt_store *s, const struct kvt_record *rec,
		    struct stat *st)
{
	g_autofree char *refp = kvt_object_ref_path(&rec->hash, rec->ref);

	return fstatat(s->objfd, refp, st, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

char *kvt_object_path(const struct kvt_record *rec)
{
	g_autofree char *refp = kvt_object_ref_path(&rec->hash, rec->ref);

	return g_strdup_printf("objects/%s", refp);
}

static int read_record_fd(int fd, struct kvt_record *rec, struct stat *st)
{
	g_autofree char *buf = NULL;
	size_t len = 0;
	ssize_t n = 0;

	if (fstat(fd, st))
		return -errno;
	if (!S_ISREG(st->st_mode) || st->st_size > KVT_RECORD_MAX)
		return -EBADMSG;
	buf = g_malloc(st->st_size + 1);
	while (len < (size_t)st->st_size &&
	       (n = pread(fd, buf + len, st->st_size - len, len)) > 0)
		len += n;
	if (n < 0)
		return -errno;
	return kvt_record_parse(buf, len, rec);
}

int kvt_record_read(struct kvt_store *s, int dirfd, const char *name,
		    struct kvt_record *rec, struct stat *st)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	int ret;

	if (fd < 0)
		return -errno;
	ret = read_record_fd(fd, rec, st);
	close(fd);
	return ret;
}

static int write_stage_record(struct kvt_store *s, const struct kvt_record *rec,
			      const struct kvt_meta *meta, char **name_out)
{
	g_autoptr(GString) body = kvt_record_encode(rec);
	char *name;
	int fd, ret = 0;

	for (;;) {
		name = stage_name(s, 'n');
		fd = openat(s->stagefd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			    meta->mode & 07777);
		if (fd >= 0)
			break;
		g_free(name);
		if (errno != EEXIST)
			return -errno;
	}
	if (write(fd, body->str, body->len) != (ssize_t)body->len)
		ret = errno_or(ENOSPC);
	else if (fchmod(fd, meta->mode & 07777) ||
		 fchown(fd, meta->uid, meta->gid))
		ret = -errno;
	else if (meta->set_times) {
		struct timespec ts[2] = { meta->atime, meta->mtime };

		if (futimens(fd, ts))
			ret = -errno;
	}
	close(fd);
	if (ret < 0) {
		unlinkat(s->stagefd, name, 0);
		g_free(name);
		return ret;
	}
	*name_out = name;
	return 0;
}

int kvt_record_install(struct kvt_store *s, int dirfd, const char *name,
		       const struct kvt_record *rec, const struct kvt_meta *meta,
		       struct kvt_record *old)
{
	g_autofree char *tmp = NULL;
	struct stat st;
	int ret;

	kvt_record_init(old);
	ret = write_stage_record(s, rec, meta, &tmp);
	if (ret < 0)
		return ret;
	for (int attempt = 0; attempt < 16; attempt++) {
		if (renameat2(s->stagefd, tmp, dirfd, name, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno == EINVAL)
			goto plain_rename;
		if (errno != EEXIST)
			goto fail;
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
			errno = EISDIR;
			goto fail;
		}
		/* Swap, so that exactly the record we replaced lands in our
		 * staging, even if another mount replaced it a moment ago. */
		if (renameat2(s->stagefd, tmp, dirfd, name, RENAME_EXCHANGE) == 0) {
			if (kvt_record_read(s, s->stagefd, tmp, old, &st) < 0)
				kvt_record_clear(old);
			unlinkat(s->stagefd, tmp, 0);
			return 0;
		}
		if (errno == EINVAL)
			goto plain_rename;
		if (errno != ENOENT)
			goto fail;
	}
	errno = EAGAIN;
fail:
	ret = -errno;
	unlinkat(s->stagefd, tmp, 0);
	return ret;

plain_rename:
	/* File systems without renameat2 flags (NFS): best effort on which
	 * record was replaced; a lost race leaves an object for fsck. */
	if (kvt_record_read(s, dirfd, name, old, &st) < 0)
		kvt_record_clear(old);
	if (renameat(s->stagefd, tmp, dirfd, name)) {
		ret = -errno;
		kvt_record_clear(old);
		unlinkat(s->stagefd, tmp, 0);
		return ret;
	}
	return 0;
}

int kvt_record_remove(struct kvt_store *s, int dirfd, const char *name)
{
	g_autofree char *tmp = stage_name(s, 'x');
	struct kvt_record rec;
	struct stat st;

	/* Moving the record into our staging is the one atomic step that
	 * removes the name; what it pointed at is then ours to release. */
	if (renameat(dirfd, name, s->stagefd, tmp))
		return -errno;
	if (kvt_record_read(s, s->stagefd, tmp, &rec, &st) == 0) {
		kvt_object_release(s, &rec);
		kvt_record_clear(&rec);
	}
	unlinkat(s->stagefd, tmp, 0);
	return 0;
}

int kvt_store_purge(struct kvt_store *s, int dirfd, const char *name,
		    const struct kvt_record *rec)
{
	g_autofree char *refp = NULL, *anchor = NULL;
	struct stat rst, ast;
	int removed = 0, ret = 0;

	if (name) {
		g_autofree char *tmp = stage_name(s, 'p');
		struct kvt_record now;
		struct stat st;

		/* Taking the record into our staging is the atomic step; if
		 * another mount had meanwhile put a new version there, it
		 * goes back. */
		if (renameat(dirfd, name, s->stagefd, tmp)) {
			if (errno != ENOENT)
				ret = -errno;
		} else if (rec && kvt_record_read(s, s->stagefd, tmp, &now, &st) == 0) {
			bool other = strcmp(now.ref, rec->ref) != 0;

			if (!other || renameat2(s->stagefd, tmp, dirfd, name, RENAME_NOREPLACE)) {
				if (other) /* superseded again meanwhile */
					kvt_object_release(s, &now);
				unlinkat(s->stagefd, tmp, 0);
			}
			removed |= !other;
			kvt_record_clear(&now);
		} else {
			unlinkat(s->stagefd, tmp, 0);
			removed = 1;
		}
	}
	if (!rec)
		return ret < 0 ? ret : removed;
	refp = kvt_object_ref_path(&rec->hash, rec->ref);
	anchor = kvt_object_anchor_path(&rec->hash);
	if (fstatat(s->objfd, refp, &rst, AT_SYMLINK_NOFOLLOW) == 0) {
		if (unlinkat(s->objfd, refp, 0) == 0)
			removed = 1;
		else if (errno != ENOENT && !ret)
			ret = -errno;
		if (fstatat(s->objfd, anchor, &ast, AT_SYMLINK_NOFOLLOW) == 0 &&
		    ast.st_ino == rst.st_ino && ast.st_dev == rst.st_dev)
			unlinkat(s->objfd, anchor, 0);
	}
	return ret < 0 ? ret : removed;
}
