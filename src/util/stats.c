#include "stats.h"

static const char *const stat_names[KVT_STAT_COUNT] = {
#define KVT_STAT_NAME(n) #n,
	KVT_STATS(KVT_STAT_NAME)
#undef KVT_STAT_NAME
};

/* The counters that move with what the bytes stored are, not with how
 * many there are: a store of bytes the store already holds (whoever
 * stored them) is a dedup, and writes no object; an unlinked name whose
 * bytes no other name holds leaves an orphan to reclaim.  Compared
 * before and after a store or an unlink of a guess, each says whether
 * another user holds the guessed bytes. */
static const bool tells_content[KVT_STAT_COUNT] = {
	[KVT_STAT_dedups] = true,
	[KVT_STAT_objects] = true,
	[KVT_STAT_bytes_stored] = true,
	[KVT_STAT_orphans_reclaimed] = true,
	[KVT_STAT_orphan_bytes_reclaimed] = true,
	/* how many distinct objects there are, as objects does */
	[KVT_STAT_scrub_objects] = true,
	[KVT_STAT_scrub_bytes] = true,
};

static GString *format(const struct kvt_stats *s, bool content)
{
	GString *out = g_string_new(NULL);

	for (int i = 0; i < KVT_STAT_COUNT; i++)
		if (content || !tells_content[i])
			g_string_append_printf(out, "%s %" G_GUINT64_FORMAT "\n", stat_names[i],
					       kvt_stat_get(s, i));
	return out;
}

GString *kvt_stats_format(const struct kvt_stats *s)
{
	return format(s, true);
}

GString *kvt_stats_format_public(const struct kvt_stats *s)
{
	return format(s, false);
}
