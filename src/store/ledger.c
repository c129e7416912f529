/* The usage other mounts add (ledger.h). */
#include "ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "io.h"
#include "lower.h"
#include "store-int.h"

#define TMP_FILE KVT_LEDGER_FILE ".new"

/* Another mount, as its file last said. */
struct peer {
	int64_t at_base;         /* its moves when this mount last counted */
	int64_t now;
	bool seen;               /* in the last listing */
};

struct kvt_ledger {
	struct kvt_store *s;
	GHashTable *peers;       /* mount id -> struct peer */
	int64_t folded;          /* what mounts now gone moved since the count */
	int64_t written;         /* our moves as our file says */
	bool wrote;
};

struct kvt_ledger *kvt_ledger_new(struct kvt_store *s)
{
	struct kvt_ledger *l = g_new0(struct kvt_ledger, 1);

	l->s = s;
	l->peers = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	kvt_ledger_write(l, 0);
	return l;
}

void kvt_ledger_free(struct kvt_ledger *l)
{
	if (!l)
		return;
	g_hash_table_destroy(l->peers);
	g_free(l);
}

/* By a rename: a reader sees the old number or the new one. */
void kvt_ledger_write(struct kvt_ledger *l, int64_t moves)
{
	char buf[32];
	int len = snprintf(buf, sizeof(buf), "%" G_GINT64_FORMAT "\n", moves);
	kvt_autofd fd = -1;

	if (l->wrote && moves == l->written)
		return;
	fd = kvt_dir_open_file(l->s->stage, TMP_FILE, O_WRONLY | O_CREAT | O_TRUNC, 0600, NULL);
	if (fd < 0 || write(fd, buf, (size_t)len) != len ||
	    kvt_dir_rename(l->s->stage, TMP_FILE, l->s->stage, KVT_LEDGER_FILE, 0) < 0)
		return; /* the others see it at their next count */
	l->written = moves;
	l->wrote = true;
}

/* What mount @id's file says; false when it has none (yet). */
static bool read_peer(struct kvt_ledger *l, const char *id, int64_t *moves)
{
	g_autoptr(kvt_dir) d = NULL;
	kvt_autofd fd = -1;
	char buf[32];
	ssize_t n;

	if (kvt_dir_open(l->s->layout.staging, id, &d) < 0)
		return false;
	fd = kvt_dir_open_file(d, KVT_LEDGER_FILE, O_RDONLY, 0, NULL);
	if (fd < 0)
		return false;
	n = kvt_pread_full(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return g_ascii_string_to_signed(g_strchomp(buf), 10, G_MININT64, G_MAXINT64, moves, NULL);
}

/* Reads every other mount's file; @rebase: their moves so far are in the
 * count about to be made. */
static void read_peers(struct kvt_ledger *l, bool rebase)
{
	g_autoptr(GPtrArray) ents = NULL;
	GHashTableIter it;
	gpointer k, v;
	int err;

	ents = kvt_dir_list(l->s->layout.staging, false, &err);
	if (!ents)
		return;
	g_hash_table_iter_init(&it, l->peers);
	while (g_hash_table_iter_next(&it, &k, &v))
		((struct peer *)v)->seen = false;
	for (guint i = 0; i < ents->len; i++) {
		const char *id = ((const struct kvt_dirent *)ents->pdata[i])->name;
		struct peer *p = g_hash_table_lookup(l->peers, id);
		int64_t moves;

		if (!strcmp(id, l->s->mount_id) || !read_peer(l, id, &moves)) {
			if (p)
				p->seen = true; /* no file now: as it last said */
			continue;
		}
		if (!p) {
			/* Born after our count: all it moved is new to us. */
			p = g_new0(struct peer, 1);
			g_hash_table_insert(l->peers, g_strdup(id), p);
		}
		p->now = moves;
		p->seen = true;
	}
	g_hash_table_iter_init(&it, l->peers);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		struct peer *p = v;

		if (!p->seen) {
			l->folded += p->now - p->at_base;
			g_hash_table_iter_remove(&it);
		} else if (rebase) {
			p->at_base = p->now;
		}
	}
	if (rebase)
		l->folded = 0;
}

int64_t kvt_ledger_read(struct kvt_ledger *l)
{
	GHashTableIter it;
	gpointer k, v;
	int64_t others;

	read_peers(l, false);
	others = l->folded;
	g_hash_table_iter_init(&it, l->peers);
	while (g_hash_table_iter_next(&it, &k, &v))
		others += ((struct peer *)v)->now - ((struct peer *)v)->at_base;
	return others;
}

void kvt_ledger_rebase(struct kvt_ledger *l)
{
	read_peers(l, true);
}
