/* The connection's guard (guard.h).
 *
 * The guard is forked by the main thread and learns of its death by
 * PR_SET_PDEATHSIG, which fires when that thread exits, not when the
 * last one does.  It then writes to the connection's abort file in
 * fusectl, as an operator would: the kernel ends every request waiting
 * on the connection, the clients' calls return, the locks they held are
 * released, and the daemon's stuck thread can finish dying.  It holds
 * that file open from the start, so it can only ever abort its own
 * connection, even once the number is another mount's. */
#include "guard.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct kvt_guard {
	pid_t pid;
};

#define FUSECTL "/sys/fs/fuse/connections"

/* The connection's number, which names its directory in fusectl: the
 * minor of the mount's device.  AT_STATX_DONT_SYNC: FUSE answers from
 * its cache, sending no request to this daemon, which is not serving
 * yet. */
static int conn_number(const char *mnt, unsigned *id)
{
	struct statx stx;

	if (statx(AT_FDCWD, mnt, AT_STATX_DONT_SYNC, 0, &stx))
		return -errno;
	if (stx.stx_dev_major != 0)
		return -ENODEV; /* not a FUSE mount's anonymous device */
	*id = stx.stx_dev_minor;
	return 0;
}

/* The connection's abort file, opened.  With no fusectl mounted, and as
 * root, from a fusectl mount of the daemon's own that is in no mount
 * namespace: a private namespace would hold a copy of every mount,
 * this one's too, and keep it alive after its unmount. */
static int open_abort(unsigned id)
{
	g_autofree char *path = g_strdup_printf(FUSECTL "/%u/abort", id);
	g_autofree char *rel = g_strdup_printf("%u/abort", id);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int fsfd, mfd, err;

	if (fd >= 0 || errno != ENOENT || geteuid() != 0)
		return fd < 0 ? -errno : fd;
	fsfd = fsopen("fusectl", FSOPEN_CLOEXEC);
	if (fsfd < 0)
		return -errno;
	mfd = fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) ? -1 :
	      fsmount(fsfd, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
						 MOUNT_ATTR_NOEXEC);
	err = errno;
	close(fsfd);
	if (mfd < 0)
		return -err;
	fd = openat(mfd, rel, O_WRONLY | O_CLOEXEC);
	err = errno;
	close(mfd);
	return fd < 0 ? -err : fd;
}

/* What follows runs in the child of a threaded process: system calls
 * only, nothing that takes a lock or allocates. */

static void on_death(int sig)
{
	(void)sig;
}

/* Whether the thread group leader of /proc/PID/stat has exited: a
 * zombie (its other threads may live on), or gone. */
static bool leader_dead(const char *stat_path)
{
	char buf[512], *p = NULL;
	ssize_t n;
	int fd = open(stat_path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT || errno == ESRCH;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 && errno == ESRCH;
	buf[n] = 0;
	/* "pid (comm) S ...": comm may hold a ')', the last one ends it. */
	for (char *c = buf; *c; c++)
		if (*c == ')')
			p = c;
	return !p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X';
}

/* Closes every descriptor but @a and @b (both above 2); 0, 1 and 2 go
 * to /dev/null.  The guard keeps nothing of the daemon's: a /dev/fuse
 * descriptor would keep the connection, a log pipe its reader. */
static void keep_only(int a, int b)
{
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (a > b) {
		int t = a;
		a = b;
		b = t;
	}
	struct rlimit rl;
	int failed = 0;

	for (int i = 0; i < 3 && nul >= 0; i++)
		dup2(nul, i);
	if (a > 3)
		failed |= close_range(3, (unsigned)a - 1, 0);
	if (b > a + 1)
		failed |= close_range((unsigned)a + 1, (unsigned)b - 1, 0);
	failed |= close_range((unsigned)b + 1, ~0U, 0);
	/* No close_range (a kernel before 5.9, or a seccomp filter): one
	 * by one, up to the limit. */
	if (failed && getrlimit(RLIMIT_NOFILE, &rl) == 0)
		for (rlim_t i = 3; i < rl.rlim_cur && i < (1 << 20); i++)
			if ((int)i != a && (int)i != b)
				close((int)i);
}

/* Microseconds of CLOCK_MONOTONIC. */
static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/* Exits 1 if it aborted the connection, else 0. */
static _Noreturn void guard_main(int abort_fd, const char *stat_path, int stop_fd)
{
	struct sigaction sa = { .sa_handler = on_death };
	struct pollfd pfd = { .fd = stop_fd, .events = POLLIN };
	long long deadline = -1; /* of the stop under way */
	sigset_t death, open_mask;
	bool aborted = false;
	char c;

	prctl(PR_SET_NAME, "kvt-guard");
	/* A stop of the whole group (systemd, a terminal's ^C) stops the
	 * daemon, which then stops its guard. */
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGPIPE, &sa, NULL);
	/* Taken only inside ppoll, after the leader was looked at: a death
	 * in between is not missed. */
	sigemptyset(&death);
	sigaddset(&death, SIGUSR1);
	sigprocmask(SIG_SETMASK, &death, NULL);
	sigemptyset(&open_mask);
	prctl(PR_SET_PDEATHSIG, SIGUSR1);
	keep_only(abort_fd, stop_fd);
	for (;;) {
		struct timespec left, *until = NULL;
		int n;

		if (leader_dead(stat_path)) {
			/* It fails if the connection is gone already. */
			(void)!write(abort_fd, "1", 1);
			_exit(1);
		}
		if (deadline >= 0) {
			long long us = deadline - now_us();

			us = us > 0 ? us : 0;
			left.tv_sec = us / 1000000;
			left.tv_nsec = us % 1000000 * 1000;
			until = &left;
		}
		n = ppoll(&pfd, 1, until, &open_mask);
		if (n == 0) {
			/* The stop did not end in time (guard.h). */
			aborted = write(abort_fd, "1", 1) == 1;
			deadline = -1;
			continue;
		}
		if (n < 0)
			continue;
		/* 's': a stop began (more may come: the first counts); 'c':
		 * the daemon is crashing; 'e', the pipe's end, or the end of
		 * the daemon's descriptors (and so of its connection):
		 * nothing left to do. */
		if (read(stop_fd, &c, 1) != 1 || c == 'e')
			_exit(aborted);
		if (c == 'c' && !aborted) {
			aborted = write(abort_fd, "1", 1) == 1;
			deadline = -1;
		}
		if (c == 's' && deadline < 0 && !aborted)
			deadline = now_us() + KVT_GUARD_STOP_GRACE_S * 1000000LL;
	}
}

/* The stop signals' handler, which tells the guard: one mount per
 * process.  The pipe's write end stays open to the process's end, for a
 * handler still running in another thread when the guard stops. */
static int stop_pipe = -1;
static const int stop_signals[2] = { SIGTERM, SIGINT };
static struct sigaction was[2];

static void on_stop(int sig)
{
	int saved = errno;

	(void)!write(stop_pipe, "s", 1);
	for (int i = 0; i < 2; i++)
		if (stop_signals[i] == sig && was[i].sa_handler != SIG_DFL &&
		    was[i].sa_handler != SIG_IGN)
			was[i].sa_handler(sig);
	errno = saved;
}

/*
 * A crash.  Before the kernel dumps a process's core, it waits for every
 * thread to stop, and a thread in an invalidation waits for a directory's
 * lock that a client holds while it waits for this daemon: the dump, and
 * the death the guard waits for, never come (ulimit -c 0 changes
 * nothing).  So the guard is told first, and aborts the connection; then
 * the signal goes on as it would have: to the handler before this one (a
 * sanitizer's), or the default action.
 */
static const int crash_signals[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP };
static struct sigaction crash_was[G_N_ELEMENTS(crash_signals)];

static void on_crash(int sig, siginfo_t *si, void *ctx)
{
	int saved = errno;

	(void)ctx;
	(void)!write(stop_pipe, "c", 1);
	for (size_t i = 0; i < G_N_ELEMENTS(crash_signals); i++)
		if (crash_signals[i] == sig)
			sigaction(sig, &crash_was[i], NULL);
	/* A fault comes again when the instruction runs again; abort()
	 * raises SIGABRT again itself; a breakpoint (g_error) and a signal
	 * sent by kill(2) do not come again: raised, and taken once this
	 * handler returns. */
	if (sig == SIGTRAP || si->si_code <= 0)
		raise(sig);
	errno = saved;
}

static void crash_handlers(bool on)
{
	struct sigaction sa = { .sa_sigaction = on_crash, .sa_flags = SA_SIGINFO };

	for (size_t i = 0; i < G_N_ELEMENTS(crash_signals); i++)
		sigaction(crash_signals[i], on ? &sa : &crash_was[i], on ? &crash_was[i] : NULL);
}

struct kvt_guard *kvt_guard_start(const char *mnt, int *why)
{
	/* The pid as this /proc knows it, which may be another pid
	 * namespace's. */
	g_autofree char *self = g_file_read_link("/proc/self", NULL);
	g_autofree char *stat_path = g_strdup_printf("/proc/%s/stat", self ? self : "self");
	struct sigaction sa = { .sa_handler = on_stop };
	struct kvt_guard *g;
	int stop[2], fd;
	unsigned id = 0;
	pid_t pid;

	/* Without /proc, the guard would take the daemon for dead. */
	if (!self || access(stat_path, R_OK)) {
		*why = self ? errno : ENOENT;
		return NULL;
	}
	fd = conn_number(mnt, &id);
	fd = fd < 0 ? fd : open_abort(id);
	if (fd < 0) {
		*why = -fd;
		return NULL;
	}
	if (pipe2(stop, O_CLOEXEC)) {
		*why = errno;
		close(fd);
		return NULL;
	}
	pid = fork();
	if (pid == 0)
		guard_main(fd, stat_path, stop[0]);
	if (pid < 0)
		*why = errno;
	close(fd);
	close(stop[0]);
	if (pid < 0) {
		close(stop[1]);
		return NULL;
	}
	g = g_new0(struct kvt_guard, 1);
	g->pid = pid;
	stop_pipe = stop[1];
	fcntl(stop_pipe, F_SETFL, O_NONBLOCK);
	sigemptyset(&sa.sa_mask);
	for (int i = 0; i < 2; i++)
		sigaction(stop_signals[i], &sa, &was[i]);
	crash_handlers(true);
	return g;
}

bool kvt_guard_stop(struct kvt_guard *g)
{
	int status = 0;
	ssize_t ret;

	if (!g)
		return false;
	for (int i = 0; i < 2; i++)
		sigaction(stop_signals[i], &was[i], NULL);
	crash_handlers(false);
	/* Read at once; should the pipe be full, a kill ends it. */
	while ((ret = write(stop_pipe, "e", 1)) < 0 && errno == EINTR)
		;
	if (ret < 0)
		kill(g->pid, SIGKILL);
	while (waitpid(g->pid, &status, 0) < 0 && errno == EINTR)
		;
	g_free(g);
	return WIFEXITED(status) && WEXITSTATUS(status) == 1;
}

void kvt_guard_unmount_dead(const char *mnt)
{
	const char *argv[] = { "fusermount3", "-u", "-z", "--", mnt, NULL };
	g_autoptr(GError) err = NULL;
	gint status;

	if (geteuid() == 0) {
		if (umount2(mnt, MNT_DETACH))
			g_warning("the aborted mount on %s stays: %s", mnt, g_strerror(errno));
		return;
	}
	if (!g_spawn_sync(NULL, (gchar **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL,
			  NULL, &status, &err) ||
	    !g_spawn_check_wait_status(status, &err))
		g_warning("the aborted mount on %s stays: fusermount3: %s", mnt, err->message);
}
