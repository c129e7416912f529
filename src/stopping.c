/* A stop that cannot end by itself (stopping.h). */
#include "stopping.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

struct kvt_stopping {
	struct kvt_guard *guard;
	GThread *thread;
	int watch_fd; /* the pipe's read end */
	bool aborted;
};

static const int stop_signals[2] = { SIGTERM, SIGINT };

/* The signal handler's state: one mount per process.  The pipe's write
 * end ('s': a stop began; 'e': the watch ends) stays open to the end of
 * the process, for a handler still running in another thread when the
 * watch ends. */
static int stop_pipe = -1;
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

/* The next byte of the pipe; 0 if none came within @ms (-1: wait). */
static char next(struct kvt_stopping *s, int ms)
{
	struct pollfd p = { .fd = s->watch_fd, .events = POLLIN };
	char c;

	for (;;) {
		int n = poll(&p, 1, ms);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;
		if (read(s->watch_fd, &c, 1) == 1)
			return c;
		if (errno != EINTR && errno != EAGAIN)
			return 'e';
	}
}

static gpointer watch(gpointer data)
{
	struct kvt_stopping *s = data;
	gint64 until;
	char c;

	while ((c = next(s, -1)) != 'e') {
		if (c != 's')
			continue;
		/* More stop signals may come: the first one counts. */
		until = g_get_monotonic_time() + KVT_STOP_GRACE_S * G_USEC_PER_SEC;
		do {
			gint64 left = until - g_get_monotonic_time();

			c = left > 0 ? next(s, (int)(left / 1000) + 1) : 0;
		} while (c == 's');
		if (c == 'e')
			break;
		s->aborted = kvt_guard_abort(s->guard);
		if (s->aborted)
			g_warning("the stop has waited %d s on the kernel: a client waits for a "
				  "reply that will not come, holding a lock a thread of the daemon "
				  "needs; the connection is aborted",
				  KVT_STOP_GRACE_S);
		else
			g_warning("the stop has waited %d s on the kernel, and there is no guard "
				  "to abort the connection: echo 1 > "
				  "/sys/fs/fuse/connections/N/abort ends it",
				  KVT_STOP_GRACE_S);
		while (next(s, -1) != 'e')
			;
		break;
	}
	return NULL;
}

struct kvt_stopping *kvt_stopping_watch(struct kvt_guard *g)
{
	struct sigaction sa = { .sa_handler = on_stop };
	struct kvt_stopping *s;
	int p[2];

	if (stop_pipe >= 0 || pipe2(p, O_CLOEXEC | O_NONBLOCK)) {
		g_warning("no watch of stops: %s", stop_pipe >= 0 ? "one already" : g_strerror(errno));
		return NULL;
	}
	s = g_new0(struct kvt_stopping, 1);
	s->guard = g;
	s->watch_fd = p[0];
	stop_pipe = p[1];
	s->thread = g_thread_new("kvt-stopping", watch, s);
	sigemptyset(&sa.sa_mask);
	for (int i = 0; i < 2; i++)
		sigaction(stop_signals[i], &sa, &was[i]);
	return s;
}

bool kvt_stopping_done(struct kvt_stopping *s)
{
	bool aborted;

	if (!s)
		return false;
	for (int i = 0; i < 2; i++)
		sigaction(stop_signals[i], &was[i], NULL);
	while (write(stop_pipe, "e", 1) < 0 && errno == EINTR)
		;
	g_thread_join(s->thread);
	close(s->watch_fd);
	aborted = s->aborted;
	g_free(s);
	return aborted;
}

void kvt_stopping_unmount(const char *mnt)
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
