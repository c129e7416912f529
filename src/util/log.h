/* Logging: glib's structured logging, one line per event, to stderr in
 * the foreground, to the journal (or syslog) once daemonized, or to a
 * file the operator names. */
#pragma once
#include <glib.h>
#include <stdbool.h>

/* Most to least severe; -o log_level= takes these words. */
enum kvt_log_level {
	KVT_LOG_ERROR,
	KVT_LOG_WARNING,
	KVT_LOG_NOTICE,		/* g_message: mount, unmount, purges */
	KVT_LOG_INFO,
	KVT_LOG_DEBUG,		/* also names the paths of every change */
};

/* Lines up to @level go to stderr (the default before anything else is
 * set, and what the unit tests get). */
void kvt_log_init(enum kvt_log_level level);

/* Lines go to the journal when it is there, else to syslog: the daemon
 * has left its terminal. */
void kvt_log_to_system(void);

/* Lines go to @path (appended); false with @error when it cannot be
 * opened. */
bool kvt_log_to_file(const char *path, GError **error);

/* Opens the log file again (a rotated file is left to its new name), or
 * reconnects to syslog.  Called on SIGHUP. */
void kvt_log_reopen(void);

/* @s as a log line has it (newly allocated): control characters
 * escaped as \n, \t, \r or \xHH, backslashes doubled.  Every line logged
 * is escaped so; this is for text shown elsewhere (user.kvtierfs.purges). */
char *kvt_log_escape(const char *s);

/* Debug lines are wanted: worth building a path for. */
bool kvt_log_debug_on(void);

/* A line said at most every @every_us: the events since it was last said
 * are counted, for the next line to say how many it stands for. */
struct kvt_log_every {
	gint64 said;     /* monotonic time of the last line; 0: none yet */
	guint64 unsaid;  /* events since */
};

/* An event: true when its line is due, with *@more the events not said
 * since the last line.  The caller serializes calls on @e. */
bool kvt_log_due(struct kvt_log_every *e, gint64 every_us, guint64 *more);
