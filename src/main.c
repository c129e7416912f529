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
#include "store.h"
#include "uring.h"

struct options {
	gboolean foreground;
	gboolean debug;
	gboolean version;
	char **opts;           /* -o, repeatable, comma separated */
	int ready_fd;
	char *tmp_suffix;
	double entry_timeout, attr_timeout, negative_timeout;
	int max_threads;
	int max_idle_threads;
	guint max_inodes;
	gboolean verify_always;
	gboolean no_uring;
	guint verify_cache;
	guint max_dir_fds;
	GString *fuse_opts;    /* -o options passed on to libfuse */
};

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

static bool parse_number(const char *s, double lo, double hi, double *out)
{
	char *end;

	errno = 0;
	*out = g_ascii_strtod(s, &end);
	return !errno && *s && !*end && *out >= lo && *out <= hi;
}

/* Takes kvtierfs's own -o options; the rest goes to libfuse, which
 * rejects what it does not know. */
static void parse_o(struct options *o)
{
	for (char **p = o->opts; p && *p; p++) {
		g_auto(GStrv) items = g_strsplit(*p, ",", -1);

		for (char **it = items; *it; it++) {
			char *eq = strchr(*it, '=');
			const char *val = eq ? eq + 1 : NULL;
			size_t klen = eq ? (size_t)(eq - *it) : strlen(*it);
			double num;

#define KEY(k) (klen == strlen(k) && !strncmp(*it, k, klen))
			if (!**it)
				continue;
			if (KEY("ready_fd")) {
				if (!val || !parse_number(val, 0, INT_MAX, &num))
					die("-o ready_fd: expects a file descriptor number");
				o->ready_fd = (int)num;
			} else if (KEY("tmp_suffix")) {
				g_free(o->tmp_suffix);
				o->tmp_suffix = g_strdup(val ? val : "");
			} else if (KEY("entry_timeout") || KEY("attr_timeout") ||
				   KEY("negative_timeout")) {
				if (!val || !parse_number(val, 0, 86400, &num))
					die("-o %.*s: expects seconds (0-86400)", (int)klen, *it);
				*(KEY("entry_timeout") ? &o->entry_timeout :
				  KEY("attr_timeout") ? &o->attr_timeout : &o->negative_timeout) = num;
			} else if (KEY("max_threads")) {
				if (!val || !parse_number(val, 1, 1024, &num))
					die("-o max_threads: expects 1-1024");
				o->max_threads = (int)num;
			} else if (KEY("max_idle_threads")) {
				if (!val || !parse_number(val, 0, 1024, &num))
					die("-o max_idle_threads: expects 0-1024");
				o->max_idle_threads = (int)num;
			} else if (KEY("verify")) {
				if (!g_strcmp0(val, "always"))
					o->verify_always = TRUE;
				else if (!g_strcmp0(val, "once"))
					o->verify_always = FALSE;
				else
					die("-o verify: expects 'once' or 'always'");
			} else if (KEY("uring")) {
				if (!g_strcmp0(val, "0") || !g_strcmp0(val, "1"))
					o->no_uring = !g_strcmp0(val, "0");
				else
					die("-o uring: expects 0 or 1");
			} else if (KEY("max_inodes")) {
				if (!val || !parse_number(val, 64, 1e9, &num))
					die("-o max_inodes: expects a number of files (64-1000000000)");
				o->max_inodes = (guint)num;
			} else if (KEY("max_dir_fds")) {
				if (!val || !parse_number(val, 16, 1048576, &num) || num != (guint)num)
					die("-o max_dir_fds: expects a number of directories (16-1048576)");
				o->max_dir_fds = (guint)num;
			} else if (KEY("verify_cache")) {
				if (!val || !parse_number(val, 16, 1e9, &num))
					die("-o verify_cache: expects a number of objects (16-1000000000)");
				o->verify_cache = (guint)num;
			} else {
				g_string_append_printf(o->fuse_opts, ",%s", *it);
			}
#undef KEY
		}
	}
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
	struct options o = {
		.ready_fd = -1,
		.entry_timeout = 1.0,
		.negative_timeout = 1.0,
		.attr_timeout = 1.0,
		.max_threads = 64,
		.max_idle_threads = -1,
		.verify_cache = 100000,
		.max_inodes = 65536,
		.max_dir_fds = 1024,
	};
	GOptionEntry entries[] = {
		{ "foreground", 'f', 0, G_OPTION_ARG_NONE, &o.foreground,
		  "Stay in the foreground", NULL },
		{ "debug", 'd', 0, G_OPTION_ARG_NONE, &o.debug,
		  "Foreground, with FUSE request tracing", NULL },
		{ "options", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &o.opts,
		  "Mount options (see kvtierfs(8))", "OPTS" },
		{ "version", 'V', 0, G_OPTION_ARG_NONE, &o.version,
		  "Print the version", NULL },
		{ NULL }
	};
	g_autoptr(GOptionContext) ctx = g_option_context_new("LOWERDIR MOUNTPOINT");
	g_autoptr(GError) err = NULL;
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *loop;
	struct kvt_fs fs = { 0 };
	char *lower, *mnt;
	int ret;

	kvt_log_init(FALSE);
	g_option_context_add_main_entries(ctx, entries, NULL);
	g_option_context_set_summary(ctx,
		"Mounts a verified, content-addressed KV-cache tier at MOUNTPOINT,\n"
		"backed by the store in LOWERDIR.");
	if (!g_option_context_parse(ctx, &argc, &argv, &err))
		die("%s (see kvtierfs --help)", err->message);
	if (o.version) {
		printf("kvtierfs %s (store format %d)\n", PACKAGE_VERSION, KVT_FORMAT_VERSION);
		return 0;
	}
	if (argc != 3)
		die("expects LOWERDIR and MOUNTPOINT (see kvtierfs --help)");
	o.tmp_suffix = g_strdup(".tmp");
	/* max_read: libfuse splices a reply through a pipe that must hold the
	 * reply and three more pages, and an unprivileged pipe holds at most
	 * 1 MiB (fs.pipe-max-size); reads a little under 1 MiB keep every
	 * reply of object bytes zero-copy. */
	o.fuse_opts = g_string_new("subtype=kvtierfs,fsname=kvtierfs,"
				   "max_read=" G_STRINGIFY(KVT_MAX_READ));
	parse_o(&o);
	/* Without allow_other only the mounting user reaches the files, and
	 * the kernel's own permission checks would cost a round trip to the
	 * daemon on every access() after a directory changed.  With it, the
	 * kernel checks every access. */
	if (strstr(o.fuse_opts->str, ",allow_other"))
		g_string_append(o.fuse_opts, ",default_permissions");
	if (o.debug)
		o.foreground = TRUE;
	kvt_log_init(o.debug);

	mnt = check_mountpoint(argv[2]);
	lower = check_lowerdir(argv[1], mnt);

	fuse_opt_add_arg(&args, "kvtierfs");
	fuse_opt_add_arg(&args, "-o");
	fuse_opt_add_arg(&args, o.fuse_opts->str);
	if (o.debug)
		fuse_opt_add_arg(&args, "-d");
	fs.se = fuse_session_new(&args, &kvt_fuse_ops, sizeof(kvt_fuse_ops), &fs);
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
		die("MOUNTPOINT %s: mount failed", argv[2]);
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
	fuse_opt_free_args(&args);
	g_strfreev(o.opts);
	g_string_free(o.fuse_opts, TRUE);
	g_free(o.tmp_suffix);
	free(lower);
	free(mnt);
	return ret ? 1 : 0;
}
