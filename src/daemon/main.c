/* kvtierfs: command line, sanity checks, mount and the session loop. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fault.h"
#include "fs.h"
#include "guard.h"
#include "inode.h"
#include "log.h"
#include "lowerr.h"
#include "memcopy.h"
#include "notify.h"
#include "options.h"
#include "receive.h"
#include "reclaim.h"
#include "scrub.h"
#include "cull.h"
#include "usage.h"
#include "service.h"
#include "share.h"
#include "stage.h"
#include "store.h"
#include "uring.h"

/* Verified copies (memcopy.h): an open waits this long for another load
 * to give one back, and a pooled copy unused this long goes back to the
 * system. */
#define COPY_WAIT_US (5 * G_USEC_PER_SEC)
#define COPY_IDLE_US (30 * G_USEC_PER_SEC)

/* One line on stderr: "kvtierfs: <why>". */
static void say(const char *fmt, ...) G_GNUC_PRINTF(1, 2);

static void say(const char *fmt, ...)
{
	va_list ap;

	fputs("kvtierfs: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Something but an automount point is mounted on @path: an automount
 * point (autofs, systemd's x-systemd.automount) is there to be mounted
 * over, and its mount runs this command. */
static bool is_mountpoint(const char *path)
{
	g_autofree char *info = NULL;
	g_auto(GStrv) lines = NULL;

	if (!g_file_get_contents("/proc/self/mountinfo", &info, NULL, NULL))
		return false;
	lines = g_strsplit(info, "\n", -1);
	for (char **l = lines; *l; l++) {
		g_auto(GStrv) f = g_strsplit(*l, " ", 6);
		/* The file system's type follows the optional fields' " - ". */
		const char *type = strstr(*l, " - ");

		/* Field 5 is the mount point, with spaces as \040. */
		if (g_strv_length(f) >= 5 && !(type && g_str_has_prefix(type, " - autofs "))) {
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
			say("MOUNTPOINT %s: a dead mount is still there; clean it with fusermount3 -u -z %s",
			    arg, arg);
		else
			say("MOUNTPOINT %s: %s", arg, g_strerror(errno));
		return NULL;
	}
	if (!S_ISDIR(st.st_mode)) {
		say("MOUNTPOINT %s: not a directory", arg);
		return NULL;
	}
	real = realpath(arg, NULL);
	if (!real) {
		say("MOUNTPOINT %s: %s", arg, g_strerror(errno));
		return NULL;
	}
	if (is_mountpoint(real)) {
		say("MOUNTPOINT %s: already mounted", arg);
		free(real);
		return NULL;
	}
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

	if (stat(arg, &st)) {
		say("LOWERDIR %s: %s", arg, g_strerror(errno));
		return NULL;
	}
	if (!S_ISDIR(st.st_mode)) {
		say("LOWERDIR %s: not a directory", arg);
		return NULL;
	}
	real = realpath(arg, NULL);
	if (!real) {
		say("LOWERDIR %s: %s", arg, g_strerror(errno));
		return NULL;
	}
	if (path_within(real, mnt) || path_within(mnt, real)) {
		say("LOWERDIR %s and MOUNTPOINT must not contain each other", arg);
		free(real);
		return NULL;
	}
	return real;
}

static void *wait_for_cancel(void *arg)
{
	for (;;)
		pause();
	return NULL;
}

/* glibc loads libgcc_s the first time a thread is cancelled, and libfuse
 * cancels its workers at unmount: a daemon out of file descriptors by
 * then could not load it and aborted, leaving its staging behind.  One
 * thread cancelled now loads it for good. */
static void load_unwinder(void)
{
	pthread_t t;

	if (pthread_create(&t, NULL, wait_for_cancel, NULL) == 0) {
		pthread_cancel(t);
		pthread_join(t, NULL);
	}
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* After raise_nofile: max_pending follows the descriptor limit, and
 * max_staged the size of the lower file system, where stages are. */
static void start_bounds(struct kvt_fs *fs, const struct kvt_options *o)
{
	struct statvfs sv;
	uint64_t lower_bytes = 0;

	if (kvt_dir_statvfs(kvt_store_names(fs->store), &sv) == 0)
		lower_bytes = (uint64_t)sv.f_blocks * sv.f_frsize;
	kvt_bounds_init(&fs->bounds, o, lower_bytes);
}

/* How often each KVT_FAULTS rule fired, for the test that set them. */
static void log_faults(void)
{
	g_autofree char *summary = kvt_faults_summary();
	g_auto(GStrv) lines = summary ? g_strsplit(summary, "\n", -1) : NULL;

	for (char **l = lines; l && *l; l++)
		g_message("fault injection: %s", *l);
}

/* Bytes of verified copies: -o copy_memory, or a sixteenth of the memory,
 * 4 GiB at most (16 loads of 80 MiB blocks at once on a 24 GiB machine). */
static uint64_t copy_budget(const struct kvt_options *o)
{
	if (o->copy_memory > 0)
		return (uint64_t)o->copy_memory << 20;
	return MIN((uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE) / 16,
		   (uint64_t)4 << 30);
}

/* Names the kernel may know: -o max_inodes, or as many as 1/64 of the
 * memory holds at 1 KiB each (what one costs the daemon at most, about
 * 600 bytes in fact): vLLM's fan-out makes a directory per block or
 * two, and a name the kernel was made to forget costs a round trip a
 * level at its next lookup. */
static guint inode_budget(const struct kvt_options *o)
{
	uint64_t mem = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);

	if (o->max_inodes > 0)
		return (guint)o->max_inodes;
	return (guint)CLAMP(mem / 64 / 1024, 65536, 4194304);
}

/* Lower directories kept open: -o max_dir_fds, or a quarter of the
 * descriptors (stages may take half, bounds.c), 1024 at least.  A lookup
 * in a directory not kept open opens it again, three more lower calls: a
 * first miss among 100k blocks in vLLM's fan-out lands in any of its 4096
 * directories of the first level. */
static guint dir_fd_budget(const struct kvt_options *o)
{
	struct rlimit rl;
	uint64_t fds = 0;

	if (o->max_dir_fds > 0)
		return (guint)o->max_dir_fds;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		fds = rl.rlim_cur == RLIM_INFINITY ? 1 << 22 : rl.rlim_cur;
	return (guint)CLAMP(fds / 4, 1024, 1048576);
}

/* The mount's state from its options and its open store. */
static void fs_init(struct kvt_fs *fs, const struct kvt_options *o, struct kvt_store *store,
		    const char *lower)
{
	fs->lower_path = g_strdup(lower);
	fs->started = g_get_real_time();
	g_mutex_init(&fs->tree_lock);
	g_mutex_init(&fs->live_lock);
	g_mutex_init(&fs->lru_lock);
	g_mutex_init(&fs->statfs_lock);
	g_mutex_init(&fs->recent_lock);
	g_mutex_init(&fs->told_lock);
	g_cond_init(&fs->statfs_done);
	fs->store = store;
	fs->dirs = kvt_dircache_new(dir_fd_budget(o));
	fs->root = kvt_inode_new_root(fs, kvt_store_names(store));
	fs->tmp_suffix = o->tmp_suffix;
	fs->entry_timeout = o->entry_timeout;
	fs->negative_timeout = o->negative_timeout;
	fs->attr_timeout = o->attr_timeout;
	fs->verify_always = o->verify == KVT_VERIFY_ALWAYS;
	if (o->verify == KVT_VERIFY_AUTO) {
		const char *remote = kvt_dir_remote_kind(kvt_store_names(store));

		/* A network file system may change an object's bytes (a
		 * replica repaired, damage on a server) and show the same
		 * size and times: only the bytes themselves can tell. */
		fs->verify_always = remote != NULL;
		fs->remote_kind = remote;
	}
	fs->sync = o->sync;
	fs->max_inodes = inode_budget(o);
	fs->verifier = kvt_verifier_new(o->verify_cache);
	if (fs->verify_always && o->copy_memory != 0)
		/* A quarter of the threads may wait for a copy: the rest serve
		 * the releases that give copies back; a quarter of those
		 * places one uid (bounds.h). */
		fs->copies = kvt_copies_new(copy_budget(o), COPY_WAIT_US, COPY_IDLE_US,
					    MAX(1, o->max_threads / 4),
					    MAX(1, o->max_threads / 16), &fs->stats);
	kvt_store_set_stats(store, &fs->stats);
	kvt_lower_errors_to(&fs->stats);
	fs->notifier = kvt_notifier_new(fs);
	/* The figures statfs falls back on; none yet is all zeros. */
	kvt_dir_statvfs(kvt_store_names(store), &fs->statfs_last);
}

/* Everything fs_init made, and the store; files being written die with
 * the mount (nothing unpublished survives). */
static void fs_fini(struct kvt_fs *fs)
{
	kvt_notifier_free(g_steal_pointer(&fs->notifier));
	kvt_lower_errors_to(NULL);
	kvt_fs_free_all(fs);
	kvt_dircache_free(fs->dirs);
	kvt_store_close(fs->store);
	kvt_verifier_free(fs->verifier);
	kvt_copies_free(fs->copies);
	g_cond_clear(&fs->statfs_done);
	g_mutex_clear(&fs->statfs_lock);
	for (guint i = 0; i < KVT_RECENT_PURGES; i++)
		g_free(fs->recent[i]);
	g_mutex_clear(&fs->recent_lock);
	g_mutex_clear(&fs->told_lock);
	g_free(fs->lower_path);
	g_mutex_clear(&fs->lru_lock);
	g_mutex_clear(&fs->live_lock);
	g_mutex_clear(&fs->tree_lock);
	kvt_bounds_fini(&fs->bounds);
}

/* Mounts, says ready, serves until unmounted or stopped by SIGTERM or
 * SIGINT; the exit status. */
static int serve(struct kvt_fs *fs, const struct kvt_options *o, const char *mnt,
		 const char *lower)
{
	struct kvt_reclaimer *reclaimer = NULL;
	struct kvt_scrubber *scrubber = NULL;
	struct kvt_share_watch *share = NULL;
	struct kvt_hup_thread hup = { 0 };
	struct kvt_guard *guard;
	struct fuse_loop_config *loop;
	g_autofree char *opts = NULL, *bounds = NULL;
	bool aborted;
	int ret;

	if (fuse_set_signal_handlers(fs->se)) {
		say("cannot set signal handlers");
		return 1;
	}
	if (fuse_session_mount(fs->se, mnt)) {
		say("MOUNTPOINT %s: mount failed", o->mountpoint);
		fuse_remove_signal_handlers(fs->se);
		return 1;
	}
	ret = kvt_receive_install(fs->se);
	if (ret < 0) /* slower, not wrong: writes are copied to aligned buffers */
		g_warning("page-aligned writes: %s", g_strerror(-ret));
	if (fuse_daemonize(o->foreground)) {
		say("cannot daemonize");
		fuse_session_unmount(fs->se);
		fuse_remove_signal_handlers(fs->se);
		return 1;
	}
	if (!o->foreground && !o->log_file)
		kvt_log_to_system();
	/* Forked by the thread that serves until the end (guard.h). */
	guard = kvt_guard_start(mnt, &ret);
	if (!guard)
		g_message("no guard of the connection (%s): a kill of the daemon could leave "
			  "clients waiting on the mount until its lower calls end",
			  g_strerror(ret));
	kvt_hup_thread_start(&hup);
	opts = kvt_options_describe(o);
	g_message("mounted %s on %s, pid %d (%s)", lower, mnt, (int)getpid(), opts);
	/* Here, not when found: a mount started in the background says
	 * nothing on its terminal (t-service.sh), and logs where it will. */
	bounds = kvt_bounds_describe(&fs->bounds);
	g_info("bounds: %s; max_inodes=%u names the kernel knows; max_dir_fds=%u", bounds,
	       fs->max_inodes, kvt_dircache_capacity(fs->dirs));
	if (kvt_store_root_closed_from(fs->store))
		g_message("LOWERDIR %s: mode %04o made 0700: others could reach the store "
			  "around the mount", lower,
			  (unsigned int)kvt_store_root_closed_from(fs->store));
	if (kvt_store_upgraded_from(fs->store))
		g_message("LOWERDIR %s: store format %d upgraded to %d: a kvtierfs of format %d "
			  "no longer mounts it", lower, kvt_store_upgraded_from(fs->store),
			  KVT_FORMAT_VERSION, kvt_store_upgraded_from(fs->store));
	if (fs->remote_kind)
		g_message("verify=auto: the store is on %s, whose size and times do not "
			  "prove the bytes unchanged: every open for reading hashes",
			  fs->remote_kind);
	if (kvt_store_no_exchange(fs->store))
		g_message("the store's file system has no RENAME_EXCHANGE: a name is "
			  "replaced or removed under a flock of its record");
	if (o->ready_fd >= 0) {
		g_autofree char *line = g_strdup_printf("ready %d\n", getpid());

		if (write(o->ready_fd, line, strlen(line)) < 0)
			g_warning("ready_fd %d: %s", o->ready_fd, g_strerror(errno));
		close(o->ready_fd);
	}
	/* After daemonizing: a thread does not survive the fork.  The
	 * sharing is known before the first request is served. */
	share = kvt_share_watch_start(fs, o->shared);
	if (o->reclaim) {
		struct kvt_reclaim_opts ro = {
			.rate = (unsigned)o->reclaim,
			.anchor_grace = KVT_RECLAIM_ANCHOR_GRACE,
		};

		reclaimer = kvt_reclaimer_new(fs->store, &ro);
		kvt_reclaimer_start(reclaimer, o->reclaim_interval);
	}
	kvt_usage_start(fs->store, (uint64_t)o->max_size, (unsigned)o->min_free);
	kvt_cull_start(fs, o);
	if (o->scrub)
		scrubber = kvt_scrubber_start(fs->store, fs->verifier, (uint64_t)o->scrub << 20,
					      o->scrub_interval);
	kvt_notify_systemd("READY=1\nSTATUS=serving");

	/* libfuse 3.14 keeps idle threads by default (max_idle_threads -1):
	 * creating them per request would burn CPU. */
	loop = fuse_loop_cfg_create();
	fuse_loop_cfg_set_max_threads(loop, o->max_threads);
	if (o->max_idle_threads >= 0)
		fuse_loop_cfg_set_idle_threads(loop, (unsigned)o->max_idle_threads);
	ret = fuse_session_loop_mt(fs->se, loop);
	fuse_loop_cfg_destroy(loop);
	/* libfuse's signal handler leaves the signal's number: a stop asked
	 * for, not a failure. */
	if (ret == SIGTERM || ret == SIGINT) {
		g_message("stopping on %s", ret == SIGTERM ? "SIGTERM" : "SIGINT");
		ret = 0;
	} else if (ret) {
		g_warning("stopping: %s", g_strerror(ret < 0 ? -ret : ret));
	}
	kvt_notify_systemd("STOPPING=1");
	kvt_reclaimer_free(reclaimer);
	kvt_scrubber_free(scrubber);
	kvt_share_watch_stop(share);
	kvt_cull_stop(fs);
	/* What is still queued for the kernel goes before it is gone. */
	kvt_notifier_free(g_steal_pointer(&fs->notifier));
	fuse_session_unmount(fs->se);
	aborted = kvt_guard_stop(guard);
	if (aborted) {
		g_warning("the stop had not ended in %d s (a thread of the daemon may have "
			  "waited for a lock held by a client that waited for a reply): the "
			  "guard aborted the connection",
			  KVT_GUARD_STOP_GRACE_S);
		kvt_guard_unmount_dead(mnt);
	}
	fuse_remove_signal_handlers(fs->se);
	g_message("unmounted %s", mnt);
	kvt_hup_thread_stop(&hup);
	return ret ? 1 : 0;
}

/* The source column of the mount table (df, findmnt): the store, unless
 * fsname= says otherwise (a later option wins). */
static int add_fsname(struct fuse_args *args, const char *lower)
{
	g_autofree char *opt = NULL;
	char *escaped = NULL;
	int ret;

	if (fuse_opt_add_opt_escaped(&escaped, lower))
		return -1;
	opt = g_strdup_printf("-ofsname=%s", escaped);
	free(escaped);
	ret = fuse_opt_insert_arg(args, 1, opt);
	return ret;
}

int main(int argc, char **argv)
{
	struct kvt_options o;
	g_autoptr(GError) err = NULL;
	struct kvt_store *store = NULL;
	struct kvt_fs fs = { 0 };
	char *lower = NULL, *mnt = NULL;
	int ret = 1;

	/* Buffers of 256 KiB and more (libfuse's request buffer, O_DIRECT
	 * and hashing buffers) are mapped and unmapped, never kept by
	 * malloc: glibc would otherwise raise this threshold at their first
	 * free and keep every later one in its arenas. */
	mallopt(M_MMAP_THRESHOLD, 256 << 10);
	kvt_hup_block();
	kvt_log_init(KVT_LOG_INFO);
	kvt_route_fuse_log();
	if (kvt_options_parse(argc, argv, &o))
		goto out;
	if (o.version)
		printf("kvtierfs %s (store format %d)\n", PACKAGE_VERSION, KVT_FORMAT_VERSION);
	if (o.help || o.version) {
		ret = 0;
		goto out;
	}
	/* max_read: libfuse splices a reply through a pipe that must hold the
	 * reply and three more pages, and an unprivileged pipe holds at most
	 * 1 MiB (fs.pipe-max-size); reads a little under 1 MiB keep every
	 * reply of object bytes zero-copy.  First, as the default it is. */
	if (fuse_opt_insert_arg(&o.fuse_args, 1, "-omax_read=" G_STRINGIFY(KVT_MAX_READ)))
		goto out;
	kvt_log_init(o.log_level);
	if (o.log_file) {
		/* Absolute: the daemon leaves its directory for / and SIGHUP
		 * opens the file again. */
		g_autofree char *path = g_canonicalize_filename(o.log_file, NULL);

		if (!kvt_log_to_file(path, &err)) {
			say("-o %s", err->message);
			goto out;
		}
	}
	if (!kvt_faults_init(g_getenv("KVT_FAULTS"), &err)) {
		say("KVT_FAULTS: %s", err->message);
		goto out;
	}
	if (kvt_faults_on)
		g_warning("KVT_FAULTS=%s: lower errors will be injected (a test setting)",
			  g_getenv("KVT_FAULTS"));

	mnt = check_mountpoint(o.mountpoint);
	lower = mnt ? check_lowerdir(o.lowerdir, mnt) : NULL;
	if (!lower)
		goto out;
	if (add_fsname(&o.fuse_args, lower))
		goto out;
	fs.se = fuse_session_new(&o.fuse_args, &kvt_fuse_ops, sizeof(kvt_fuse_ops), &fs);
	if (!fs.se)
		goto out; /* libfuse said why, on one line */
	store = kvt_store_open(lower, &err);
	if (!store) {
		say("%s", err->message);
		goto out;
	}
	if (kvt_store_stale_removed(store))
		g_message("removed staging left by %u dead mount(s)",
			  kvt_store_stale_removed(store));
	/* Before fs_init: the directories kept open follow the limit. */
	raise_nofile();
	fs_init(&fs, &o, store, lower);
	kvt_uring_enable(!o.no_uring);
	/* Modes come from clients with their umask applied by the kernel:
	 * the daemon's own must not take more away. */
	umask(0);
	start_bounds(&fs, &o);
	load_unwinder();
	ret = serve(&fs, &o, mnt, lower);
	/* The session's destroy frees what the kernel left, then the rest. */
	fuse_session_destroy(g_steal_pointer(&fs.se));
	fs_fini(&fs);
	kvt_uring_cleanup();
	kvt_stage_cleanup();
	log_faults();
out:
	kvt_faults_fini();
	if (fs.se)
		fuse_session_destroy(fs.se);
	kvt_options_free(&o);
	free(lower);
	free(mnt);
	return ret;
}
