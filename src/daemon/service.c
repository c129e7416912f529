/* What a service manager and an operator expect of the daemon beyond the
 * file system: libfuse's messages in kvtierfs's log, SIGHUP for the log,
 * readiness for systemd. */
#include "service.h"

#include <fuse_log.h>
#include <signal.h>
#include <string.h>
#ifdef HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "log.h"

/* libfuse's own messages ("fuse: ...", and -d's request trace) go where
 * kvtierfs's go: once daemonized, stderr is /dev/null.  libfuse writes
 * some lines in pieces: each thread's pieces wait for their newline. */
static void free_pending(gpointer s)
{
	g_string_free(s, TRUE);
}

static GPrivate fuse_log_pending = G_PRIVATE_INIT(free_pending);

static void fuse_log_to_glib(enum fuse_log_level level, const char *fmt, va_list ap)
{
	GString *pending = g_private_get(&fuse_log_pending);
	GLogLevelFlags flags;
	char *nl;

	if (!pending) {
		pending = g_string_new(NULL);
		g_private_set(&fuse_log_pending, pending);
	}
	g_string_append_vprintf(pending, fmt, ap);
	if (level <= FUSE_LOG_ERR)
		flags = G_LOG_LEVEL_CRITICAL;
	else if (level == FUSE_LOG_WARNING)
		flags = G_LOG_LEVEL_WARNING;
	else if (level <= FUSE_LOG_NOTICE)
		flags = G_LOG_LEVEL_MESSAGE;
	else if (level == FUSE_LOG_INFO)
		flags = G_LOG_LEVEL_INFO;
	else
		flags = G_LOG_LEVEL_DEBUG;
	while ((nl = memchr(pending->str, '\n', pending->len))) {
		size_t n = (size_t)(nl - pending->str);

		if (n)
			g_log("fuse", flags, "%.*s", (int)n, pending->str);
		g_string_erase(pending, 0, (gssize)n + 1);
	}
}

/* SIGHUP reopens the log instead of stopping the mount: blocked in every
 * thread, it is taken by one of them. */

static void *take_hups(void *data)
{
	struct kvt_hup_thread *h = data;
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	while (sigwait(&set, &sig) == 0 && !g_atomic_int_get(&h->stop))
		kvt_log_reopen();
	return NULL;
}

void kvt_hup_block(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

void kvt_hup_thread_start(struct kvt_hup_thread *h)
{
	h->running = pthread_create(&h->thread, NULL, take_hups, h) == 0;
	if (!h->running)
		g_warning("SIGHUP will not reopen the log: no thread to take it");
}

void kvt_hup_thread_stop(struct kvt_hup_thread *h)
{
	if (!h->running)
		return;
	g_atomic_int_set(&h->stop, 1);
	pthread_kill(h->thread, SIGHUP);
	pthread_join(h->thread, NULL);
	h->running = false;
}

/* systemd's Type=notify: READY once the mount serves, STOPPING when it
 * stops.  Without NOTIFY_SOCKET in the environment it does nothing. */
void kvt_notify_systemd(const char *state)
{
#ifdef HAVE_LIBSYSTEMD
	int ret = sd_notify(0, state);

	if (ret < 0)
		g_warning("sd_notify: %s", g_strerror(-ret));
#else
	(void)state;
#endif
}

void kvt_route_fuse_log(void)
{
	fuse_set_log_func(fuse_log_to_glib);
}
