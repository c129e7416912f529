/* kvtierfs: command line, sanity checks, mount and the session loop. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "inode.h"
#include "log.h"
#include "notify.h"
#include "options.h"
#include "store.h"
#include "uring.h"

static void die(const char *fmt, ...) G_GNUC_PRINTF(1, 2) G_GNUC_NORETURN;

static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("kvtierfs: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static bool is_mountpoint(const char *path)
{
	g_autofree char *info = NULL;
	g_auto(GStrv) lines = NULL;

	if (!g_file_get_contents("/proc/self/mountinfo", &info, NULL, NULL))
		return false;
	lines = g_strsplit(info, "\n", -1);
	for (char **l = lines; *l; l++) {
		g_auto(GStrv) f = g_strsplit(*l, " ", 6);

		/* Field 5 is the mount point, with spaces as \040. */
		if (g_strv_length(f) >= 5) {
			g_autofree char *mp = g_strcompress(f[4]);

			if (!strcmp(mp, path))
				return true;
		}
	}
	return false;
}

static char *check_mountpoint(const char *arg)
{
	struct stat st;
	char *real;

	if (stat(arg, &st)) {
		if (errno == ENOTCONN)
			die("MOUNTPOINT %s: a dead mount is still there; clean it with fusermount3 -u -z %s",
			    arg, arg);
		die("MOUNTPOINT %s: %s", arg, g_strerror(errno));
	}
	if (!S_ISDIR(st.st_mode))
		die("MOUNTPOINT %s: not a directory", arg);
	real = realpath(arg, NULL);
	if (!real)
		die("MOUNTPOINT %s: %s", arg, g_strerror(errno));
	if (is_mountpoint(real))
		die("MOUNTPOINT %s: already mounted", arg);
	return real;
}

/* @path is @dir or under it ("/a/b" is not under "/a/bc"). */
static bool path_within(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return !strncmp(path, dir, n) &&
	       (path[n] == '\0' || path[n] == '/' || (n == 1 && dir[0] == '/'));
}

static char *check_lowerdir(const char *arg, const char *mnt)
{
	struct stat st;
	char *real;

	if (stat(arg, &st))
		die("LOWERDIR %s: %s", arg, g_strerror(errno));
	if (!S_ISDIR(st.st_mode))
		die("LOWERDIR %s: not a directory", arg);
	real = realpath(arg, NULL);
	if (!real)
		die("LOWERDIR %s: %s", arg, g_strerror(errno));
	if (path_within(real, mnt) || path_within(mnt, real))
		die("LOWERDIR %s and MOUNTPOINT must not contain each other", arg);
	return real;
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int main(int argc, char **argv)
{
	struct kvt_options o;
	g_autoptr(GError) err = NULL;
	struct fuse_loop_config *loop;
	struct kvt_fs fs = { 0 };
	char *lower, *mnt;
	int ret;

	kvt_log_init(FALSE);
	if (kvt_options_parse(argc, argv, &o))
		exit(1);
	if (o.version)
		printf("kvtierfs %s (store format %d)\n", PACKAGE_VERSION, KVT_FORMAT_VERSION);
	if (o.help || o.version) {
		kvt_options_free(&o);
		return 0;
	}
	/* max_read: libfuse splices a reply through a pipe that must hold the
	 * reply and three more pages, and an unprivileged pipe holds at most
	 * 1 MiB (fs.pipe-max-size); reads a little under 1 MiB keep every
	 * reply of object bytes zero-copy.  First, as the default it is. */
	if (fuse_opt_insert_arg(&o.fuse_args, 1, "-omax_read=" G_STRINGIFY(KVT_MAX_READ)))
		exit(1);
	kvt_log_init(o.debug);

	mnt = check_mountpoint(o.mountpoint);
	lower = check_lowerdir(o.lowerdir, mnt);

	fs.se = fuse_session_new(&o.fuse_args, &kvt_fuse_ops, sizeof(kvt_fuse_ops), &fs);
	if (!fs.se)
		exit(1); /* libfuse said why, on one line */

	fs.store = kvt_store_open(lower, &err);
	if (!fs.store)
		die("%s", err->message);
	if (kvt_store_stale_removed(fs.store))
		g_message("removed staging left by %u dead mount(s)",
			  kvt_store_stale_removed(fs.store));
	g_mutex_init(&fs.tree_lock);
	g_mutex_init(&fs.live_lock);
	g_mutex_init(&fs.lru_lock);
	fs.dirs = kvt_dircache_new(o.max_dir_fds);
	fs.root = kvt_inode_new_root(&fs, kvt_store_names(fs.store));
	fs.tmp_suffix = o.tmp_suffix;
	fs.entry_timeout = o.entry_timeout;
	fs.negative_timeout = o.negative_timeout;
	fs.attr_timeout = o.attr_timeout;
	fs.verify_always = o.verify_always;
	kvt_uring_enable(!o.no_uring);
	fs.max_inodes = o.max_inodes;
	fs.verifier = kvt_verifier_new(o.verify_cache);
	kvt_store_set_stats(fs.store, &fs.stats);
	fs.notifier = kvt_notifier_new(&fs);
	raise_nofile();

	if (fuse_set_signal_handlers(fs.se) ||
	    fuse_session_mount(fs.se, mnt)) {
		kvt_store_close(fs.store);
		die("MOUNTPOINT %s: mount failed", o.mountpoint);
	}
	if (fuse_daemonize(o.foreground)) {
		fuse_session_unmount(fs.se);
		kvt_store_close(fs.store);
		die("cannot daemonize");
	}
	if (o.ready_fd >= 0) {
		g_autofree char *line = g_strdup_printf("ready %d\n", getpid());

		if (write(o.ready_fd, line, strlen(line)) < 0)
			g_warning("ready_fd %d: %s", o.ready_fd, g_strerror(errno));
		close(o.ready_fd);
	}

	/* libfuse 3.14 keeps idle threads by default (max_idle_threads -1):
	 * creating them per request would burn CPU. */
	loop = fuse_loop_cfg_create();
	fuse_loop_cfg_set_max_threads(loop, o.max_threads);
	if (o.max_idle_threads >= 0)
		fuse_loop_cfg_set_idle_threads(loop, (unsigned)o.max_idle_threads);
	ret = fuse_session_loop_mt(fs.se, loop);
	fuse_loop_cfg_destroy(loop);

	kvt_notifier_free(g_steal_pointer(&fs.notifier));
	fuse_session_unmount(fs.se);
	fuse_remove_signal_handlers(fs.se);
	fuse_session_destroy(fs.se);
	/* Pending files die with the mount (nothing unpublished survives). */
	kvt_fs_free_all(&fs);
	kvt_dircache_free(fs.dirs);
	kvt_store_close(fs.store);
	kvt_verifier_free(fs.verifier);
	g_mutex_clear(&fs.lru_lock);
	g_mutex_clear(&fs.live_lock);
	g_mutex_clear(&fs.tree_lock);
	kvt_options_free(&o);
	free(lower);
	free(mnt);
	return ret ? 1 : 0;
}
