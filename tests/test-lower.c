/* Unit tests of the door to LOWERDIR (lower.h) and of the bounded
 * directory cache (dircache.h): nothing is reached through a symbolic
 * link, a FIFO where a file should be is refused without blocking, names
 * are one component, and a store with a planted link is refused without
 * touching what the link points to.  Prints TAP. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dircache.h"
#include "layout.h"
#include "lower.h"
#include "unit.h"

static char *path_in(const char *top, const char *rel)
{
	return g_build_filename(top, rel, NULL);
}

static void test_names(void)
{
	ok(!kvt_name_ok("") && !kvt_name_ok(".") && !kvt_name_ok("..") &&
	   !kvt_name_ok("a/b") && !kvt_name_ok(NULL) && kvt_name_ok("a.b") &&
	   kvt_name_ok("..x"), "a name is one path component, never . or ..");
}

static void test_links(const char *top, const char *outside)
{
	g_autofree char *a = path_in(top, "a"), *ab = path_in(top, "a/b");
	g_autofree char *link = path_in(top, "link"), *out = path_in(top, "out");
	g_autofree char *file = path_in(top, "a/file"), *flink = path_in(top, "a/flink");
	g_autofree char *secret = path_in(outside, "secret");
	g_autoptr(kvt_dir) root = NULL;
	struct kvt_dir *d = NULL;
	struct stat st;
	int fd, ret;

	g_mkdir(a, 0755);
	g_mkdir(ab, 0755);
	g_file_set_contents(file, "x", 1, NULL);
	g_file_set_contents(secret, "secret", 6, NULL);
	chmod(secret, 0600);
	symlink("a", link);
	symlink(outside, out);
	symlink(secret, flink);

	ok(kvt_dir_open_root(top, &root) == 0, "LOWERDIR is opened");
	ok(kvt_dir_open(root, "a/b", &d) == 0, "a path of two components beneath it opens");
	kvt_dir_unref(g_steal_pointer(&d));
	ret = kvt_dir_open(root, "link", &d);
	ok((ret == -ELOOP || ret == -ENOTDIR) && !d,
	   "a symbolic link to a directory inside is not followed (ELOOP, ENOTDIR)");
	ok(kvt_dir_open(root, "link/b", &d) < 0 && !d,
	   "nor as a component of a path");
	ok(kvt_dir_open(root, "out", &d) < 0 && kvt_dir_open(root, "../", &d) < 0 &&
	   kvt_dir_open(root, "/tmp", &d) < 0 && !d,
	   "a link outside, '..' and an absolute path are refused");
	ok(kvt_dir_open(root, "a", &d) == 0, "a directory is held");
	fd = kvt_dir_open_file(d, "flink", O_RDONLY, 0, NULL);
	ok(fd == -EBADMSG, "a symbolic link where a file should be is refused (EBADMSG)");
	ok(kvt_dir_setattr(d, "flink", KVT_SET_MODE, 0666, 0, 0, NULL) == -EBADMSG &&
	   stat(secret, &st) == 0 && (st.st_mode & 07777) == 0600,
	   "chmod through it is refused, and the file outside keeps its mode");
	ok(kvt_dir_unlink(d, "b/x") == -EINVAL && kvt_dir_stat(d, "..", &st) == -EINVAL,
	   "an operation on a name of several components or '..' is refused (EINVAL)");
	ok(kvt_dir_open_file(d, "b", O_RDONLY, 0, NULL) == -EBADMSG,
	   "a directory where a file should be is refused");
	fd = kvt_dir_open_file(d, "file", O_RDONLY, 0, &st);
	ok(fd >= 0 && S_ISREG(st.st_mode) && st.st_size == 1, "a regular file opens, with its metadata");
	if (fd >= 0)
		close(fd);
	kvt_dir_unref(d);
}

static void test_fifo(const char *top)
{
	g_autofree char *fifo = path_in(top, "fifo");
	g_autoptr(kvt_dir) root = NULL;
	int r1, r2;

	mkfifo(fifo, 0644);
	kvt_dir_open_root(top, &root);
	/* A FIFO nobody writes would block an open for reading forever. */
	alarm(10);
	r1 = kvt_dir_open_file(root, "fifo", O_RDONLY, 0, NULL);
	r2 = kvt_dir_open_file(root, "fifo", O_WRONLY, 0, NULL);
	alarm(0);
	ok(r1 == -EBADMSG && r2 == -EBADMSG,
	   "a FIFO where a file should be is refused, for reading or writing, without blocking");
	g_unlink(fifo);
}

/* A look at a name that holds it (O_PATH) opens nothing there, follows no
 * link, and opens a directory or a file from the hold, the same one. */
static void test_hold(const char *parent, const char *outside)
{
	g_autofree char *top = path_in(parent, "hold");
	g_autofree char *d = path_in(top, "hd"), *f = path_in(top, "hf");
	g_autofree char *fifo = path_in(top, "hfifo"), *link = path_in(top, "hl");
	g_autoptr(kvt_dir) root = NULL;
	g_autoptr(kvt_dir) dir = NULL;
	struct kvt_dir *gone_link = NULL;
	struct stat st, sub;
	char buf[8] = { 0 };
	int h, fd;

	g_mkdir(top, 0755);
	g_mkdir(d, 0755);
	g_file_set_contents(f, "bytes", 5, NULL);
	mkfifo(fifo, 0644);
	symlink(outside, link);
	kvt_dir_open_root(top, &root);

	h = kvt_dir_hold(root, "hd", &st);
	ok(h >= 0 && S_ISDIR(st.st_mode) && kvt_dir_from_hold(h, "hd", &st, &dir) == 0 &&
	   dir->ino == st.st_ino && kvt_dir_mkdir(dir, "sub", 0755) == 0 &&
	   kvt_dir_stat(root, "hd", &sub) == 0 && sub.st_nlink == 3,
	   "a held directory is opened from its hold, and is the one named");
	if (h >= 0)
		close(h);
	h = kvt_dir_hold(root, "hf", &st);
	fd = h >= 0 ? kvt_file_reopen(h, O_RDONLY) : -1;
	ok(S_ISREG(st.st_mode) && fd >= 0 && read(fd, buf, sizeof(buf)) == 5 &&
	   !strcmp(buf, "bytes") && kvt_dir_from_hold(h, "hf", &st, &dir) == -ENOTDIR,
	   "a held file is read from its hold, and is no directory");
	if (fd >= 0)
		close(fd);
	if (h >= 0)
		close(h);
	alarm(10);
	h = kvt_dir_hold(root, "hfifo", &st);
	alarm(0);
	ok(h >= 0 && S_ISFIFO(st.st_mode), "a FIFO is held without opening it (no block)");
	if (h >= 0)
		close(h);
	h = kvt_dir_hold(root, "hl", &st);
	ok(h >= 0 && S_ISLNK(st.st_mode), "a symbolic link is held as itself, not followed");
	if (h >= 0)
		close(h);
	ok(kvt_dir_hold(root, "none", &st) == -ENOENT && kvt_dir_hold(root, "a/b", &st) == -EINVAL,
	   "a missing name is not held; a path is no name");
	ok(kvt_dir_open_path(root, "hl", false, &gone_link) == -ENOTDIR &&
	   kvt_dir_open_path(root, "hfifo", false, &gone_link) == -ENOTDIR &&
	   kvt_dir_open_path(root, "hf", false, &gone_link) == -ENOTDIR,
	   "a directory held by its name refuses a link, a FIFO, a file");

	nlink_t before = 0, after = 1;
	struct kvt_dir *gone = NULL;

	ok(kvt_dir_mkdir(root, "rm", 0755) == 0 && kvt_dir_open(root, "rm", &gone) == 0 &&
	   kvt_dir_links_now(gone, &before) == 0 && kvt_dir_rmdir(root, "rm") == 0 &&
	   kvt_dir_links_now(gone, &after) == 0 && before == 2 && after == 0,
	   "a directory's link count as its file system has it now: 2, then 0 once removed");
	kvt_dir_unref(gone);
}

static void test_list(const char *top)
{
	g_autoptr(kvt_dir) root = NULL;
	g_autoptr(GPtrArray) ents = NULL;
	int ret;

	kvt_dir_open_root(top, &root);
	ents = kvt_dir_list(root, true, &ret);
	ok(ents && ents->len == 3 &&
	   !strcmp(((struct kvt_dirent *)ents->pdata[0])->name, "a") &&
	   !strcmp(((struct kvt_dirent *)ents->pdata[2])->name, "out"),
	   "a listing has every entry but . and .., sorted");
}

static void test_dircache(const char *top)
{
	struct kvt_dircache *c = kvt_dircache_new(4);
	g_autoptr(kvt_dir) root = NULL;
	struct kvt_dir *held = NULL, *d;
	struct stat st;
	bool good = true;

	kvt_dir_open_root(top, &root);
	for (uint64_t k = 1; k <= 10; k++) {
		good = good && kvt_dir_open(root, "a", &d) == 0;
		if (!good)
			break;
		kvt_dircache_put(c, k, d);
		if (k == 1)
			held = kvt_dircache_get(c, 1);
		kvt_dir_unref(d);
	}
	ok(good && kvt_dircache_size(c) == 4, "dircache: 10 directories put, 4 kept (its capacity)");
	ok(!kvt_dircache_get(c, 1) && !kvt_dircache_get(c, 6), "the least recently used went");
	d = kvt_dircache_get(c, 10);
	ok(d && d->refs == 2, "the latest is there, referenced by the cache and the caller");
	kvt_dir_unref(d);
	ok(held && fstat(held->fd, &st) == 0 && S_ISDIR(st.st_mode),
	   "a directory evicted while held stays open for its holder");
	kvt_dir_unref(held);
	kvt_dircache_drop(c, 10);
	ok(!kvt_dircache_get(c, 10) && kvt_dircache_size(c) == 3, "a dropped one is gone");
	kvt_dircache_free(c);
}

/* A directory held by an O_PATH descriptor (kvt_dir_from_hold,
 * kvt_dir_open_path) serves the calls on the directory itself too:
 * fsync, its mode, its xattrs, a listing. */
static void test_path_only(const char *top)
{
	g_autoptr(kvt_dir) root = NULL, d = NULL, held = NULL;
	g_autoptr(GPtrArray) ents = NULL;
	struct stat st;
	char buf[8] = { 0 };
	int err = 0, h;

	kvt_dir_open_root(top, &root);
	kvt_dir_mkdir(root, "po", 0755);
	ok(kvt_dir_open_path(root, "po", false, &d) == 0 && d->path_only &&
	   kvt_dir_mkdir(d, "sub", 0755) == 0 && kvt_dir_sync(d) == 0 &&
	   kvt_dir_sync_up(d, root) == 0,
	   "a directory held by its name: names made in it, synced, and every one above");
	ok(d && kvt_dir_setattr(d, NULL, KVT_SET_MODE, 0711, 0, 0, NULL) == 0 &&
	   kvt_dir_stat(root, "po", &st) == 0 && (st.st_mode & 07777) == 0711,
	   "its mode is set");
	ok(d && kvt_dir_setxattr(d, "user.k", "v1", 2, 0) == 0 &&
	   kvt_dir_getxattr(d, "user.k", buf, sizeof(buf)) == 2 && !strcmp(buf, "v1") &&
	   kvt_dir_listxattr(d, buf, sizeof(buf)) > 0 && kvt_dir_removexattr(d, "user.k") == 0 &&
	   kvt_dir_getxattr(d, "user.k", buf, sizeof(buf)) == -ENODATA,
	   "its xattrs are set, read, listed and removed");
	ents = d ? kvt_dir_list(d, true, &err) : NULL;
	ok(ents && ents->len == 1 && !strcmp(((struct kvt_dirent *)ents->pdata[0])->name, "sub"),
	   "it is listed");
	h = kvt_dir_hold(root, "po", &st);
	ok(h >= 0 && kvt_dir_from_hold(h, "po", &st, &held) == 0 && held->path_only &&
	   kvt_dir_sync(held) == 0 && kvt_dir_stat(held, "sub", &st) == 0,
	   "a directory kept from its hold: the same");
	if (h >= 0)
		close(h);
}

static void test_sync_up(const char *top)
{
	g_autoptr(kvt_dir) root = NULL, ab = NULL;

	kvt_dir_open_root(top, &root);
	kvt_dir_open(root, "a/b", &ab);
	ok(ab && kvt_dir_sync_up(ab, root) == 0, "a directory and every one above it are synced");
}

/* A store whose staging/ was replaced by a link to another directory:
 * the mount and fsck refuse it, and the other directory keeps its
 * files. */
static void test_planted_staging(const char *outside)
{
	g_autofree char *top = g_dir_make_tmp("kvt-lower-store-XXXXXX", NULL);
	g_autofree char *staging = path_in(top, "staging");
	g_autofree char *victim = path_in(outside, "victim");
	g_autofree char *victim_file = path_in(outside, "victim/file");
	g_autoptr(GError) err = NULL;
	struct kvt_store *s = kvt_store_open(top, &err);
	struct kvt_layout l;

	kvt_store_close(s);
	g_mkdir(victim, 0755);
	g_file_set_contents(victim_file, "keep", 4, NULL);
	{
		g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", staging);

		ok(s && system(cmd) == 0 && symlink(victim, staging) == 0,
		   "a store's staging/ is replaced by a link to another directory");
	}
	s = kvt_store_open(top, &err);
	ok(!s && err && strstr(err->message, "staging"), "the store is refused, saying why");
	g_clear_error(&err);
	ok(!kvt_layout_open(top, KVT_LAYOUT_EXISTING, &l, &err), "fsck's way in refuses it too");
	ok(g_file_test(victim_file, G_FILE_TEST_EXISTS), "and the directory the link points to keeps its files");
	kvt_store_close(s);
	{
		g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", top);

		system(cmd);
	}
}

int main(void)
{
	g_autofree char *top = g_dir_make_tmp("kvt-lower-XXXXXX", NULL);
	g_autofree char *outside = g_dir_make_tmp("kvt-lower-out-XXXXXX", NULL);

	printf("1..37\n");
	test_names();
	test_links(top, outside);
	test_fifo(top);
	test_list(top);
	test_hold(top, outside);
	test_dircache(top);
	test_sync_up(top);
	test_path_only(top);
	test_planted_staging(outside);
	{
		g_autofree char *cmd = g_strdup_printf("rm -rf '%s' '%s'", top, outside);

		ok(system(cmd) == 0, "cleanup");
	}
	return n_fail ? 1 : 0;
}
