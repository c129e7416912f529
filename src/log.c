/* Routes glib log messages to stderr as single lines.  Tests read the
 * daemon's stderr, so a line says what happened and nothing more. */
#include "log.h"
#include <stdio.h>

static gboolean log_debug;

static void log_handler(const gchar *domain, GLogLevelFlags level,
			const gchar *message, gpointer data)
{
	const char *tag = "";

	if ((level & G_LOG_LEVEL_DEBUG) && !log_debug)
		return;
	if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL))
		tag = "fatal: ";
	else if (level & G_LOG_LEVEL_WARNING)
		tag = "warning: ";
	fprintf(stderr, "kvtierfs: %s%s\n", tag, message);
}

void kvt_log_init(gboolean debug)
{
	log_debug = debug;
	g_log_set_default_handler(log_handler, NULL);
}
