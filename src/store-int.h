/* What the store's own modules share (not for its users). */
#pragma once
#include "store.h"

#define KVT_FANOUT 256

struct kvt_store {
	struct kvt_layout layout;
	struct kvt_dir *stage;   /* staging/<mount id>: this mount's */
	int lockfd;              /* holds the staging lock for the mount's life */
	char *mount_id;
	guint64 seq;             /* unique names in staging and references */
	guint stale_removed;
	struct kvt_stats *stats;
	/* objects/<ab>, opened as first used: a fixed number of fds. */
	GMutex fanout_lock;
	struct kvt_dir *fanout[KVT_FANOUT];
};

/* A name unique in this mount's staging area: "<kind>.<hex>". */
char *kvt_store_stage_name(struct kvt_store *s, char kind);
/* A reference id unique across mounts. */
void kvt_store_new_ref(struct kvt_store *s, char ref[KVT_REF_MAX]);

static inline void kvt_store_count(struct kvt_store *s, enum kvt_stat which, uint64_t n)
{
	if (s->stats)
		kvt_stat_add(s->stats, which, n);
}
