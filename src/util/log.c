/* One line per event wherever the operator looks: stderr while the daemon
 * has a terminal (tests read it), the journal or syslog once daemonized
 * (stderr is /dev/null then), or a file named by -o log_file. */
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

enum target { TO_STDERR, TO_SYSTEM, TO_FILE };

static enum kvt_log_level log_level = KVT_LOG_INFO;
static enum target log_target = TO_STDERR;
static bool log_journal;	/* stderr is the journal (systemd) */
static GMutex file_lock;	/* log_file and log_path */
static FILE *log_file;
static char *log_path;

static enum kvt_log_level level_of(GLogLevelFlags flags)
{
	if (flags & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL))
		return KVT_LOG_ERROR;
	if (flags & G_LOG_LEVEL_WARNING)
		return KVT_LOG_WARNING;
	if (flags & G_LOG_LEVEL_MESSAGE)
		return KVT_LOG_NOTICE;
	if (flags & G_LOG_LEVEL_INFO)
		return KVT_LOG_INFO;
	return KVT_LOG_DEBUG;
}

static const char *tag_of(enum kvt_log_level level)
{
	switch (level) {
	case KVT_LOG_ERROR:
		return "error: ";
	case KVT_LOG_WARNING:
		return "warning: ";
	default:
		return "";
	}
}

static int syslog_priority(enum kvt_log_level level)
{
	static const int prio[] = {
		[KVT_LOG_ERROR] = LOG_ERR, [KVT_LOG_WARNING] = LOG_WARNING,
		[KVT_LOG_NOTICE] = LOG_NOTICE, [KVT_LOG_INFO] = LOG_INFO,
		[KVT_LOG_DEBUG] = LOG_DEBUG,
	};

	return prio[level];
}

static const char *message_of(const GLogField *fields, gsize n)
{
	for (gsize i = 0; i < n; i++)
		if (!strcmp(fields[i].key, "MESSAGE"))
			return fields[i].value;
	return "";
}

static bool needs_escape(unsigned char c)
{
	return c < 0x20 || c == 0x7f || c == '\\';
}

/* @msg with its control characters escaped (\n, \t, \r, \x1b...) and
 * its backslashes doubled, or NULL when it has none.  Names come from
 * clients: one with a newline must not end the line and forge another,
 * nor one with an escape sequence drive the operator's terminal. */
static char *escape_controls(const char *msg)
{
	GString *out;

	for (const char *p = msg;; p++) {
		if (!*p)
			return NULL;
		if (needs_escape(*p))
			break;
	}
	out = g_string_sized_new(strlen(msg) + 16);
	for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
		if (!needs_escape(*p))
			g_string_append_c(out, *p);
		else if (*p == '\\')
			g_string_append(out, "\\\\");
		else if (*p == '\n')
			g_string_append(out, "\\n");
		else if (*p == '\t')
			g_string_append(out, "\\t");
		else if (*p == '\r')
			g_string_append(out, "\\r");
		else
			g_string_append_printf(out, "\\x%02x", *p);
	}
	return g_string_free(out, FALSE);
}

char *kvt_log_escape(const char *s)
{
	char *escaped = escape_controls(s);

	return escaped ? escaped : g_strdup(s);
}

/* The journal gets glib's fields (priority, code location), the message
 * @msg, and a name to be found by: journalctl -t kvtierfs. */
static GLogWriterOutput to_journal(GLogLevelFlags flags, const GLogField *fields, gsize n,
				   const char *msg)
{
	g_autofree GLogField *all = g_new(GLogField, n + 1);

	memcpy(all, fields, n * sizeof(*fields));
	for (gsize i = 0; i < n; i++)
		if (!strcmp(all[i].key, "MESSAGE"))
			all[i] = (GLogField){ "MESSAGE", msg, -1 };
	all[n] = (GLogField){ "SYSLOG_IDENTIFIER", "kvtierfs", -1 };
	return g_log_writer_journald(flags, all, n + 1, NULL);
}

static void to_file(enum kvt_log_level level, const char *msg)
{
	g_autoptr(GDateTime) now = g_date_time_new_now_utc();
	g_autofree char *stamp = g_date_time_format(now, "%Y-%m-%dT%H:%M:%S.%fZ");

	g_mutex_lock(&file_lock);
	if (log_file) {
		fprintf(log_file, "%s kvtierfs[%d]: %s%s\n", stamp, (int)getpid(),
			tag_of(level), msg);
		fflush(log_file);
	}
	g_mutex_unlock(&file_lock);
}

static GLogWriterOutput writer(GLogLevelFlags flags, const GLogField *fields, gsize n,
			       gpointer data)
{
	enum kvt_log_level level = level_of(flags);
	g_autofree char *escaped = NULL;
	const char *msg;

	if (level > log_level)
		return G_LOG_WRITER_HANDLED;
	msg = message_of(fields, n);
	escaped = escape_controls(msg);
	if (escaped)
		msg = escaped;
	switch (log_target) {
	case TO_FILE:
		to_file(level, msg);
		return G_LOG_WRITER_HANDLED;
	case TO_SYSTEM:
		if (to_journal(flags, fields, n, msg) == G_LOG_WRITER_HANDLED)
			return G_LOG_WRITER_HANDLED;
		syslog(syslog_priority(level), "%s%s", tag_of(level), msg);
		return G_LOG_WRITER_HANDLED;
	case TO_STDERR:
		if (log_journal && to_journal(flags, fields, n, msg) == G_LOG_WRITER_HANDLED)
			return G_LOG_WRITER_HANDLED;
		fprintf(stderr, "kvtierfs: %s%s\n", tag_of(level), msg);
		return G_LOG_WRITER_HANDLED;
	}
	return G_LOG_WRITER_UNHANDLED;
}

void kvt_log_init(enum kvt_log_level level)
{
	static gsize installed;

	log_level = level;
	if (g_once_init_enter(&installed)) {
		log_journal = g_log_writer_is_journald(fileno(stderr));
		g_log_set_writer_func(writer, NULL, NULL);
		g_once_init_leave(&installed, 1);
	}
}

void kvt_log_to_system(void)
{
	openlog("kvtierfs", LOG_PID, LOG_DAEMON);
	log_target = TO_SYSTEM;
}

/* Line-buffered appends: a line is written whole or not at all, and lines
 * of a rotated file do not land in the new one. */
static FILE *open_log(const char *path, GError **error)
{
	FILE *f = fopen(path, "ae");

	if (!f) {
		int e = errno;

		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(e),
			    "log_file %s: %s", path, g_strerror(e));
		return NULL;
	}
	return f;
}

bool kvt_log_to_file(const char *path, GError **error)
{
	FILE *f = open_log(path, error);

	if (!f)
		return false;
	g_mutex_lock(&file_lock);
	if (log_file)
		fclose(log_file);
	log_file = f;
	g_free(log_path);
	log_path = g_strdup(path);
	g_mutex_unlock(&file_lock);
	log_target = TO_FILE;
	return true;
}

void kvt_log_reopen(void)
{
	g_autoptr(GError) err = NULL;
	FILE *f;

	switch (log_target) {
	case TO_FILE:
		g_mutex_lock(&file_lock);
		f = open_log(log_path, &err);
		if (f) {
			fclose(log_file);
			log_file = f;
		}
		g_mutex_unlock(&file_lock);
		if (err) /* the old file keeps the lines */
			g_warning("SIGHUP: %s; still logging to the file open before", err->message);
		else
			g_message("SIGHUP: log_file %s reopened", log_path);
		break;
	case TO_SYSTEM:
		closelog(); /* the next line connects again */
		g_message("SIGHUP: reconnected to the system log");
		break;
	case TO_STDERR:
		g_message("SIGHUP: logging to stderr, nothing to reopen");
		break;
	}
}

bool kvt_log_debug_on(void)
{
	return log_level >= KVT_LOG_DEBUG;
}

bool kvt_log_due(struct kvt_log_every *e, gint64 every_us, guint64 *more)
{
	gint64 now = g_get_monotonic_time();

	if (e->said && now - e->said < every_us) {
		e->unsaid++;
		return false;
	}
	*more = e->unsaid;
	e->unsaid = 0;
	e->said = now;
	return true;
}
