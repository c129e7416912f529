/* The blocks other mounts have open (peerpins.h). */
#include "peerpins.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "io.h"
#include "lower.h"
#include "store-int.h"

#define TMP_FILE KVT_PEERPINS_FILE ".new"
/* A file of more is cut there: the blocks past it may go. */
#define MAX_FILE (4 << 20)

struct kvt_peerpins {
	struct kvt_store *s;
	GHashTable *others;      /* keys (uint64_t *) the others have open */
	gint64 read_at;          /* monotonic */
	bool wrote_empty;        /* our file says none */
};

struct kvt_peerpins *kvt_peerpins_new(struct kvt_store *s)
{
	struct kvt_peerpins *p = g_new0(struct kvt_peerpins, 1);

	p->s = s;
	p->others = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
	return p;
}

void kvt_peerpins_free(struct kvt_peerpins *p)
{
	if (!p)
		return;
	g_hash_table_destroy(p->others);
	g_free(p);
}

/* By a rename: a reader sees the old set or the new one. */
void kvt_peerpins_write(struct kvt_peerpins *p, GHashTable *pins)
{
	g_autoptr(GString) buf = g_string_new(NULL);
	GHashTableIter it;
	gpointer k;
	kvt_autofd fd = -1;

	if (!g_hash_table_size(pins) && p->wrote_empty)
		return;
	g_hash_table_iter_init(&it, pins);
	while (g_hash_table_iter_next(&it, &k, NULL) && buf->len < MAX_FILE)
		g_string_append_printf(buf, "%" G_GINT64_MODIFIER "x\n", *(uint64_t *)k);
	fd = kvt_dir_open_file(p->s->stage, TMP_FILE, O_WRONLY | O_CREAT | O_TRUNC, 0600, NULL);
	if (fd < 0 || write(fd, buf->str, buf->len) != (ssize_t)buf->len ||
	    kvt_dir_rename(p->s->stage, TMP_FILE, p->s->stage, KVT_PEERPINS_FILE, 0) < 0)
		return; /* the next change writes it again */
	p->wrote_empty = !g_hash_table_size(pins);
}

/* Adds mount @id's keys to p->others. */
static void read_peer(struct kvt_peerpins *p, const char *id)
{
	g_autoptr(kvt_dir) d = NULL;
	g_autofree char *buf = NULL;
	kvt_autofd fd = -1;
	struct stat st;
	ssize_t n;

	if (kvt_dir_open(p->s->layout.staging, id, &d) < 0)
		return;
	fd = kvt_dir_open_file(d, KVT_PEERPINS_FILE, O_RDONLY, 0, NULL);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0)
		return;
	buf = g_malloc((gsize)MIN(st.st_size, MAX_FILE) + 1);
	n = kvt_pread_full(fd, buf, (size_t)MIN(st.st_size, MAX_FILE), 0);
	if (n <= 0)
		return;
	buf[n] = '\0';
	for (char *line = buf, *end; *line; line = end) {
		guint64 key;

		end = strchrnul(line, '\n');
		if (*end)
			*end++ = '\0';
		if (g_ascii_string_to_unsigned(line, 16, 1, G_MAXUINT64, &key, NULL))
			g_hash_table_add(p->others, g_memdup2(&key, sizeof(key)));
	}
}

void kvt_peerpins_read(struct kvt_peerpins *p, gint64 max_age_us)
{
	g_autoptr(GPtrArray) ents = NULL;
	gint64 now = g_get_monotonic_time();
	int err;

	if (p->read_at && now - p->read_at < max_age_us)
		return;
	p->read_at = now;
	ents = kvt_dir_list(p->s->layout.staging, false, &err);
	if (!ents)
		return; /* as they last said */
	g_hash_table_remove_all(p->others);
	for (guint i = 0; i < ents->len; i++) {
		const char *id = ((const struct kvt_dirent *)ents->pdata[i])->name;

		if (strcmp(id, p->s->mount_id))
			read_peer(p, id);
	}
}

bool kvt_peerpins_has(struct kvt_peerpins *p, uint64_t key)
{
	return g_hash_table_contains(p->others, &key);
}
