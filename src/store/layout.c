/* Opening and creating the layout (layout.h), and the staging
 * directories' locks. */
#include "layout.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"

static const char *const areas[] = { "objects", "names", "staging" };
/* Made with a new store; opened where it exists (layout.h). */
static const char *const new_areas[] = { "objects", "names", "staging", KVT_MOVES };

static bool fail(GError **err, int errnum, const char *lowerdir, const char *fmt, ...)
	G_GNUC_PRINTF(4, 5);

static bool fail(GError **err, int errnum, const char *lowerdir, const char *fmt, ...)
{
	g_autofree char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	g_set_error(err, G_FILE_ERROR, g_file_error_from_errno(errnum),
		    "LOWERDIR %s%s%s", lowerdir, msg[0] == ' ' ? "" : ": ", msg);
	return false;
}

const char *kvt_layout_what_is(struct kvt_dir *d, const char *name)
{
	struct stat st;

	if (kvt_dir_stat(d, name, &st) < 0)
		return "unreadable";
	switch (st.st_mode & S_IFMT) {
	case S_IFDIR: return "a directory";
	case S_IFLNK: return "a symbolic link";
	case S_IFIFO: return "a FIFO";
	case S_IFSOCK: return "a socket";
	case S_IFCHR: return "a character device";
	case S_IFBLK: return "a block device";
	default: return "a regular file";
	}
}

/* Whether @name in @root is an empty directory. */
static bool empty_dir(struct kvt_dir *root, const char *name)
{
	g_autoptr(kvt_dir) d = NULL;
	g_autoptr(GPtrArray) ents = NULL;
	int ret = kvt_dir_open(root, name, &d);

	if (ret < 0)
		return false;
	ents = kvt_dir_list(d, false, &ret);
	return ents && ents->len == 0;
}

/* Empty, or a store that a power cut stopped half made (create_store):
 * its empty areas, a marker not renamed yet.  Either is made a store. */
static bool is_empty(struct kvt_dir *root)
{
	int ret;
	g_autoptr(GPtrArray) ents = kvt_dir_list(root, false, &ret);

	if (!ents)
		return false;
	for (guint i = 0; i < ents->len; i++) {
		const struct kvt_dirent *e = ents->pdata[i];
		bool area = false;

		/* A fresh ext4 file system has lost+found. */
		if (!strcmp(e->name, "lost+found") || !strcmp(e->name, KVT_MARKER ".new"))
			continue;
		for (size_t a = 0; a < G_N_ELEMENTS(new_areas); a++)
			area = area || !strcmp(e->name, new_areas[a]);
		if (!area || !empty_dir(root, e->name))
			return false;
	}
	return true;
}

int kvt_marker_parse(const char *buf, size_t len, int *version)
{
	const size_t mlen = strlen(KVT_MARKER " ");
	size_t i = mlen, digits = 0;
	long long v = 0;

	if (len < mlen || memcmp(buf, KVT_MARKER " ", mlen))
		return -EBADMSG;
	/* Digits as "%d" writes them, few enough for an int: no sign, no
	 * space, no leading zero. */
	for (; i < len && buf[i] >= '0' && buf[i] <= '9'; i++, digits++) {
		if (digits == 1 && buf[mlen] == '0')
			return -EBADMSG;
		v = v * 10 + (buf[i] - '0');
		if (v > INT_MAX)
			return -EBADMSG;
	}
	if (digits == 0)
		return -EBADMSG;
	/* Then the end, after at most one newline. */
	if (i < len && buf[i] == '\n')
		i++;
	if (i != len)
		return -EBADMSG;
	*version = (int)v;
	return 0;
}

/* The marker's format version; -errno, -EBADMSG when it is not a marker. */
static int read_marker(struct kvt_dir *root, int *version)
{
	/* Longer than any marker: a longer file is not one. */
	char buf[64];
	kvt_autofd fd = kvt_dir_open_file(root, KVT_MARKER, O_RDONLY, 0, NULL);
	ssize_t n;

	if (fd < 0)
		return fd;
	n = read(fd, buf, sizeof(buf));
	if (n < 0)
		return -errno;
	return kvt_marker_parse(buf, n, version);
}

int kvt_layout_write_marker(struct kvt_dir *root)
{
	char buf[64];
	int len, ret;
	kvt_autofd fd = -1;

	kvt_dir_unlink(root, KVT_MARKER ".new");
	fd = kvt_dir_open_file(root, KVT_MARKER ".new", O_WRONLY | O_CREAT | O_EXCL, 0600,
			       NULL);
	if (fd < 0)
		return fd;
	len = snprintf(buf, sizeof(buf), KVT_MARKER " %d\n", KVT_FORMAT_VERSION);
	ret = kvt_fault(KVT_FAULT_WRITE, KVT_MARKER ".new");
	errno = 0;
	if (ret == 0 && write(fd, buf, len) != len)
		ret = errno ? -errno : -EIO;
	if (ret == 0)
		ret = kvt_file_sync(fd, KVT_MARKER ".new");
	if (ret < 0) {
		kvt_dir_unlink(root, KVT_MARKER ".new");
		return ret;
	}
	ret = kvt_dir_sync(root);
	if (ret == 0)
		ret = kvt_dir_rename(root, KVT_MARKER ".new", root, KVT_MARKER, 0);
	if (ret == 0)
		ret = kvt_dir_sync(root);
	return ret;
}

/* The areas, then the marker by rename: a store is either marked and
 * complete, or an empty-looking directory that the next mount completes.
 * Everything is made durable before the marker says "store", and the
 * marker before a mount reports ready: a power cut must not leave a
 * marker without its bytes. */
static int create_store(struct kvt_dir *root)
{
	int ret;

	for (size_t i = 0; i < G_N_ELEMENTS(new_areas); i++) {
		/* names/ is the mount's root, whose mode the users see. */
		ret = kvt_dir_mkdir(root, new_areas[i],
				    strcmp(new_areas[i], "names") ? 0700 : 0755);
		if (ret < 0 && ret != -EEXIST)
			return ret;
	}
	return kvt_layout_write_marker(root);
}

/* The three areas, and moves/ where it exists, opened into @out. */
static int open_areas(struct kvt_layout *out, const char **which)
{
	struct kvt_dir **dirs[] = { &out->objects, &out->names, &out->staging };
	int ret;

	for (size_t i = 0; i < G_N_ELEMENTS(areas); i++) {
		ret = kvt_dir_open(out->root, areas[i], dirs[i]);
		if (ret < 0) {
			*which = areas[i];
			return ret;
		}
	}
	ret = kvt_dir_open(out->root, KVT_MOVES, &out->moves);
	if (ret < 0 && ret != -ENOENT) {
		*which = KVT_MOVES;
		return ret;
	}
	return 0;
}

/* Whether LOWERDIR's owner is trusted: root, or this process's user.
 * Anyone else who owns it can enter it, whatever its mode, and read or
 * forge what the mount checks (layout.h); out->root_mode gets its mode. */
static bool root_owner_ok(struct kvt_layout *out, const char *lowerdir, GError **err)
{
	struct stat st;
	int ret = kvt_dir_stat(out->root, NULL, &st);

	if (ret < 0)
		return fail(err, -ret, lowerdir, "%s", g_strerror(-ret));
	if (st.st_uid != 0 && st.st_uid != geteuid())
		return fail(err, EPERM, lowerdir,
			    " is owned by uid %u, not by root%s: its owner could reach the "
			    "store around the mount", (unsigned int)st.st_uid,
			    geteuid() ? " or this user" : "");
	out->root_mode = st.st_mode & 07777;
	return true;
}

int kvt_layout_close_root(struct kvt_layout *l)
{
	int ret;

	if (!(l->root_mode & 077))
		return 0;
	ret = kvt_dir_setattr(l->root, NULL, KVT_SET_MODE, 0700, 0, 0, NULL);
	if (ret < 0)
		return ret;
	l->root_mode = 0700;
	return 1;
}

/* A store that others can enter is closed (out->root_closed_from says it
 * was, for the caller to log); one that cannot be closed (not ours to
 * change, read-only) is refused. */
static bool close_root(struct kvt_layout *out, const char *lowerdir, GError **err)
{
	mode_t was = out->root_mode;
	int ret = kvt_layout_close_root(out);

	if (ret < 0)
		return fail(err, -ret, lowerdir,
			    " is mode %04o: others can reach the store around the mount, and it "
			    "cannot be made 0700: %s", (unsigned int)was, g_strerror(-ret));
	if (ret > 0)
		out->root_closed_from = was;
	return true;
}

/* kvt_layout_open, which closes LOWERDIR when @close. */
static bool layout_open(const char *lowerdir, enum kvt_layout_open how, bool close,
			struct kvt_layout *out, GError **err)
{
	const char *which;
	int version = 0, ret;

	memset(out, 0, sizeof(*out));
	ret = kvt_dir_open_root(lowerdir, &out->root);
	if (ret < 0)
		return fail(err, -ret, lowerdir, "%s", g_strerror(-ret));
	/* Before a store is made in it, and before anything is read. */
	if (!root_owner_ok(out, lowerdir, err))
		goto out;
	ret = read_marker(out->root, &version);
	if (ret == -ENOENT && how == KVT_LAYOUT_CREATE) {
		if (!is_empty(out->root)) {
			fail(err, EEXIST, lowerdir, " is not empty and not a kvtierfs store (no %s)",
			     KVT_MARKER);
			goto out;
		}
		ret = create_store(out->root);
		if (ret < 0) {
			fail(err, -ret, lowerdir, "cannot create a store: %s", g_strerror(-ret));
			goto out;
		}
		ret = read_marker(out->root, &version);
	}
	if (ret == -ENOENT) {
		fail(err, ENOENT, lowerdir, " is not a kvtierfs store (no %s)", KVT_MARKER);
		goto out;
	}
	if (ret == -EBADMSG) {
		const char *what = kvt_layout_what_is(out->root, KVT_MARKER);

		if (strcmp(what, "a regular file"))
			fail(err, EBADMSG, lowerdir, "%s is %s, not a kvtierfs store marker",
			     KVT_MARKER, what);
		else
			fail(err, EBADMSG, lowerdir, "%s is not a kvtierfs store marker",
			     KVT_MARKER);
		goto out;
	}
	if (ret < 0) {
		fail(err, -ret, lowerdir, "cannot use store: %s: %s", KVT_MARKER,
		     g_strerror(-ret));
		goto out;
	}
	if (version < KVT_FORMAT_OLDEST || version > KVT_FORMAT_VERSION) {
		fail(err, EINVAL, lowerdir, "store format %d, this kvtierfs reads formats %d to %d",
		     version, KVT_FORMAT_OLDEST, KVT_FORMAT_VERSION);
		goto out;
	}
	out->format = version;
	/* A directory that is not a store is left as it was found. */
	if (close && !close_root(out, lowerdir, err))
		goto out;
	ret = open_areas(out, &which);
	if (ret == -ENOTDIR || ret == -ELOOP) {
		fail(err, -ret, lowerdir, "damaged store: %s is %s, not a directory", which,
		     kvt_layout_what_is(out->root, which));
		goto out;
	}
	if (ret < 0) {
		fail(err, -ret, lowerdir, "damaged store: %s/: %s", which, g_strerror(-ret));
		goto out;
	}
	return true;
out:
	kvt_layout_close(out);
	return false;
}

bool kvt_layout_open(const char *lowerdir, enum kvt_layout_open how,
		     struct kvt_layout *out, GError **err)
{
	return layout_open(lowerdir, how, true, out, err);
}

bool kvt_layout_open_unmarked(const char *lowerdir, struct kvt_layout *out, int *marker,
			      GError **err)
{
	const char *which;
	int ret;

	*marker = 0;
	memset(out, 0, sizeof(*out));
	ret = kvt_dir_open_root(lowerdir, &out->root);
	if (ret < 0)
		return fail(err, -ret, lowerdir, "%s", g_strerror(-ret));
	if (!root_owner_ok(out, lowerdir, err)) {
		kvt_layout_close(out);
		return false;
	}
	ret = read_marker(out->root, &(int){ 0 });
	if (ret != -ENOENT && ret != -EBADMSG) {
		/* Marked (maybe another format), or unreadable: as a mount,
		 * but an open LOWERDIR is the checker's to report. */
		kvt_layout_close(out);
		return layout_open(lowerdir, KVT_LAYOUT_EXISTING, false, out, err);
	}
	if (open_areas(out, &which) < 0) {
		if (ret == -ENOENT)
			fail(err, ENOENT, lowerdir, " is not a kvtierfs store (no %s)",
			     KVT_MARKER);
		else
			fail(err, EBADMSG, lowerdir, "%s is not a kvtierfs store marker",
			     KVT_MARKER);
		kvt_layout_close(out);
		return false;
	}
	*marker = ret;
	return true;
}

void kvt_layout_close(struct kvt_layout *l)
{
	g_clear_pointer(&l->moves, kvt_dir_unref);
	g_clear_pointer(&l->staging, kvt_dir_unref);
	g_clear_pointer(&l->names, kvt_dir_unref);
	g_clear_pointer(&l->objects, kvt_dir_unref);
	g_clear_pointer(&l->root, kvt_dir_unref);
}

/* @d/@name, opened with @oflags, and a write lock on @len bytes of it
 * from @start (0: to its end, however long it grows) taken. */
static int take_lock(struct kvt_dir *d, const char *name, int oflags, off_t start, off_t len)
{
	int fd = kvt_dir_open_file(d, name, O_RDWR | oflags, 0600, NULL);
	int ret;

	if (fd < 0)
		return fd;
	ret = kvt_file_lock_range(fd, name, start, len);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	return fd;
}

int kvt_staging_lock(struct kvt_dir *stage, bool create)
{
	return take_lock(stage, "lock", create ? O_CREAT | O_EXCL : 0, 0, 0);
}

/* Past any marker's end: the byte is nobody's data. */
#define RECLAIMER_BYTE 4096
#define EVICTOR_BYTE 4097

int kvt_layout_lock_reclaimer(struct kvt_layout *l)
{
	return take_lock(l->root, KVT_MARKER, 0, RECLAIMER_BYTE, 1);
}

int kvt_layout_lock_evictor(struct kvt_layout *l)
{
	return take_lock(l->root, KVT_MARKER, 0, EVICTOR_BYTE, 1);
}

bool kvt_lead_take(struct kvt_layout *l, struct kvt_lead *lead)
{
	int fd;

	if (lead->fd >= 0)
		return true;
	fd = lead->job->lock(l);
	if (fd == -EAGAIN) {
		if (!lead->deferring)
			g_message("%s", lead->job->other);
		lead->deferring = true;
		return false;
	}
	if (fd < 0) {
		g_debug("%s: %s: %s; going on without it", KVT_MARKER, lead->job->lock_name,
			g_strerror(-fd));
		return true;
	}
	if (lead->deferring)
		g_message("%s", lead->job->now);
	lead->deferring = false;
	lead->fd = fd;
	return true;
}

void kvt_lead_release(struct kvt_lead *lead)
{
	if (lead->fd >= 0)
		close(lead->fd);
	lead->fd = -1;
}

int kvt_staging_live(struct kvt_layout *l, const char *name)
{
	g_autoptr(kvt_dir) stage = NULL;
	kvt_autofd fd = -1;
	int ret = kvt_dir_open(l->staging, name, &stage);

	if (ret < 0)
		return ret == -ENOENT ? 0 : ret;
	fd = kvt_dir_open_file(stage, "lock", O_RDONLY, 0, NULL);
	if (fd < 0)
		/* No lock file: a dead mount's, or one dying at birth. */
		return fd == -ENOENT ? 0 : fd;
	return kvt_file_locked(fd, "lock");
}

/* Whether every entry of @d is a ".nfs" name: a file NFS keeps linked
 * under such a name, unlinked while open, until its last close. */
static bool only_silly(struct kvt_dir *d)
{
	g_autoptr(GPtrArray) ents = NULL;
	int err;

	ents = kvt_dir_list(d, false, &err);
	for (guint i = 0; ents && i < ents->len; i++)
		if (!g_str_has_prefix(((const struct kvt_dirent *)ents->pdata[i])->name, ".nfs"))
			return false;
	return ents != NULL;
}

/* The staging directory @name (@stage) removed, once the ".nfs" names
 * that files closed just now left there are gone (up to 1 s). */
static int rmdir_stage(struct kvt_dir *staging, struct kvt_dir *stage, const char *name)
{
	int ret = kvt_dir_rmdir(staging, name);

	for (int i = 0; ret == -ENOTEMPTY && i < 100 && only_silly(stage); i++) {
		g_usleep(10 * 1000);
		ret = kvt_dir_rmdir(staging, name);
	}
	return ret;
}

int kvt_staging_remove(struct kvt_layout *l, const char *name)
{
	g_autoptr(kvt_dir) stage = NULL;
	g_autoptr(GPtrArray) ents = NULL;
	kvt_autofd lock = -1;
	int ret = kvt_dir_open(l->staging, name, &stage);

	if (ret < 0)
		/* A symbolic link or a file where a staging directory should
		 * be: only the entry itself goes, never what it points to. */
		return ret == -ENOTDIR || ret == -ELOOP ? kvt_dir_unlink(l->staging, name) : ret;
	/* The lock is taken first, made if it is missing, and its file goes
	 * last: a mount being born here (its lock not made or not taken yet)
	 * then fails to make or take it and starts over in another
	 * directory, and a mount that holds it keeps every file. */
	lock = take_lock(stage, "lock", O_CREAT, 0, 0);
	if (lock == -EAGAIN)
		return -EBUSY;
	ents = kvt_dir_list(stage, false, &ret);
	if (!ents)
		return ret;
	for (guint i = 0; i < ents->len; i++) {
		const struct kvt_dirent *e = ents->pdata[i];
		int r;

		if (lock >= 0 && !strcmp(e->name, "lock"))
			continue;
		/* A directory in a staging directory is nobody's; one level
		 * is all a staging directory can hold. */
		r = kvt_dir_unlink(stage, e->name);
		if (r == -EISDIR)
			r = kvt_dir_rmdir(stage, e->name);
		if (r < 0 && r != -ENOENT && !ret)
			ret = r;
	}
	if (ret == 0 && lock >= 0)
		ret = kvt_dir_unlink(stage, "lock");
	/* On NFS the lock, unlinked while open, stays as ".nfs<hex>" until
	 * this close; then the client removes it, an instant later. */
	if (lock >= 0) {
		close(lock);
		lock = -1;
	}
	if (ret == 0 || ret == -ENOENT)
		ret = rmdir_stage(l->staging, stage, name);
	return ret == -ENOENT ? 0 : ret;
}
