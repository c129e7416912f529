/* Logging: glib's logger with one "kvtierfs: " line per message on stderr. */
#pragma once
#include <glib.h>

void kvt_log_init(gboolean debug);
