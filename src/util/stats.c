#include "stats.h"

static const char *const stat_names[KVT_STAT_COUNT] = {
#define KVT_STAT_NAME(n) #n,
	KVT_STATS(KVT_STAT_NAME)
#undef KVT_STAT_NAME
};

GString *kvt_stats_format(const struct kvt_stats *s)
{
	GString *out = g_string_new(NULL);

	for (int i = 0; i < KVT_STAT_COUNT; i++)
		g_string_append_printf(out, "%s %" G_GUINT64_FORMAT "\n", stat_names[i],
				       kvt_stat_get(s, i));
	return out;
}
