/* What the store's own modules share (not for its users). */
#pragma once
#include <glib.h>
#include <stdbool.h>

#include "layout.h"
#include "lower.h"
#include "record.h"
#include "stats.h"

#define KVT_FANOUT 256

struct kvt_store {
	struct kvt_layout layout;
	struct kvt_dir *stage;   /* staging/<mount id>: this mount's */
	int lockfd;              /* holds the staging lock for the mount's life */
	char *mount_id;
	guint64 seq;             /* unique names in staging and references */
	guint stale_removed;
	int upgraded_from;      /* the format this mount upgraded, or 0 */
	/* The lower file system refuses RENAME_EXCHANGE (GlusterFS, NFS):
	 * names change under a hold (hold.h). */
	bool no_exchange;
	/* It refuses RENAME_NOREPLACE too: a new name is made by a link. */
	bool no_noreplace;
	/* NFS: a file unlinked while open here stays linked as ".nfs<hex>"
	 * until its last close: a link count counts those (object.c). */
	bool silly_renames;
	struct kvt_stats *stats;
	struct kvt_usage *usage; /* NULL: no budget (usage.h) */
	struct kvt_evictor *evictor; /* NULL: none (evictor.h) */
	/* objects/<ab>, opened as first used: a fixed number of fds. */
	GMutex fanout_lock;
	struct kvt_dir *fanout[KVT_FANOUT];
};

/* A name unique in this mount's staging area: "<kind>.<hex>". */
char *kvt_store_stage_name(struct kvt_store *s, char kind);
/* The last KVT_TOKEN_LEN characters of the mount id (random): the first
 * ones of every reference id the mount makes, and of its markers in
 * moves/, so that its references and moves can be told its own. */
#define KVT_TOKEN_LEN 8
const char *kvt_store_token(struct kvt_store *s);
/* A reference id unique across mounts: the token, then a number. */
void kvt_store_new_ref(struct kvt_store *s, char ref[KVT_REF_MAX]);
/* A move of records (a rename of a name or a directory, the rewrite of a
 * record, a record put back) is marked in moves/ while it lasts: begin
 * creates the marker (its name in *@marker), end removes it and frees the
 * name.  A move whose marker cannot be made must not happen. */
int kvt_store_move_begin(struct kvt_store *s, char **marker);
void kvt_store_move_end(struct kvt_store *s, char *marker);

static inline void kvt_store_count(struct kvt_store *s, enum kvt_stat which, uint64_t n)
{
	if (s->stats)
		kvt_stat_add(s->stats, which, n);
}
