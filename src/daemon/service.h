/* The daemon as a service (service.c). */
#pragma once
#include <glib.h>
#include <pthread.h>
#include <stdbool.h>

/* libfuse's messages go through glib's log (log.h), a line each. */
void kvt_route_fuse_log(void);

/* Blocks SIGHUP in the calling thread; call before any thread starts, so
 * that every thread inherits the mask and only the SIGHUP thread takes
 * it. */
void kvt_hup_block(void);

/* A thread that takes SIGHUP and reopens the log (kvt_log_reopen). */
struct kvt_hup_thread {
	pthread_t thread;
	bool running;
	gint stop;
};

void kvt_hup_thread_start(struct kvt_hup_thread *h);
void kvt_hup_thread_stop(struct kvt_hup_thread *h);

/* sd_notify(@state) when built with libsystemd and NOTIFY_SOCKET is set;
 * else nothing. */
void kvt_notify_systemd(const char *state);
