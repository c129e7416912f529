/* The scrub (scrub.h). */
#include "scrub.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hash.h"
#include "log.h"
#include "lower.h"
#include "object.h"
#include "store-int.h"
#include "usage.h"
#include "verify.h"

/* Bytes hashed between two looks at the rate and at a stop. */
#define CHUNK ((uint64_t)4 << 20)

struct kvt_scrubber {
	struct kvt_store *s;
	struct kvt_verifier *v;
	uint64_t rate;
	double interval;
	GThread *thread;
	GMutex lock;
	GCond cond;
	bool stop;        /* under lock */
	gint64 t0;        /* the pass's start, and */
	uint64_t hashed;  /* its bytes hashed so far: the pace */
	char *buf;
};

/* Waits until @us from now, or a stop: false on a stop. */
static bool nap(struct kvt_scrubber *sc, gint64 us)
{
	gint64 until = g_get_monotonic_time() + us;
	bool go;

	g_mutex_lock(&sc->lock);
	while (!sc->stop && g_get_monotonic_time() < until)
		g_cond_wait_until(&sc->cond, &sc->lock, until);
	go = !sc->stop;
	g_mutex_unlock(&sc->lock);
	return go;
}

/* @n more bytes hashed: waits as long as the rate wants. */
static bool pace(struct kvt_scrubber *sc, uint64_t n)
{
	gint64 due;

	sc->hashed += n;
	due = sc->t0 + (gint64)((double)sc->hashed / (double)sc->rate * G_USEC_PER_SEC);
	return nap(sc, MAX(due - g_get_monotonic_time(), 0));
}

/* Hashes @fd's @size bytes at the pace: 0 and *@h; -EINTR on a stop; the
 * read's -errno. */
static int hash_paced(struct kvt_scrubber *sc, int fd, uint64_t size, kvt_hash *h)
{
	kvt_hash_stream *hs = kvt_hash_stream_new();
	uint64_t off = 0;
	int ret = 0;

	while (off < size && ret == 0) {
		size_t want = MIN(CHUNK, size - off);
		ssize_t n = pread(fd, sc->buf, want, (off_t)off);

		if (n <= 0) {
			ret = n < 0 ? -errno : -ENODATA;
			break;
		}
		kvt_hash_stream_update(hs, sc->buf, (size_t)n);
		off += (uint64_t)n;
		if (!pace(sc, (uint64_t)n))
			ret = -EINTR;
	}
	if (ret == 0)
		kvt_hash_stream_digest(hs, h);
	kvt_hash_stream_free(hs);
	return ret;
}

/* Removes every link of the rotten object @h, inode @ino, in @fan (its
 * anchor and references all start with its hash; another inode of the
 * same hash, the same bytes stored again since, stays). */
static guint remove_links(struct kvt_dir *fan, GPtrArray *ents, const kvt_hash *h, ino_t ino)
{
	char hex[KVT_HASH_HEX_LEN + 1];
	struct stat st;
	guint n = 0;

	kvt_hash_hex(h, hex);
	for (guint i = 0; i < ents->len; i++) {
		const struct kvt_dirent *e = ents->pdata[i];

		if (!strncmp(e->name, hex, KVT_HASH_HEX_LEN) &&
		    (e->name[KVT_HASH_HEX_LEN] == '\0' || e->name[KVT_HASH_HEX_LEN] == '.') &&
		    kvt_dir_stat(fan, e->name, &st) == 0 && st.st_ino == ino &&
		    kvt_dir_unlink(fan, e->name) == 0)
			n++;
	}
	return n;
}

/* Scrubs one object link @name of @fan (@dir), unless its inode was
 * hashed already this pass (@seen).  -EINTR on a stop. */
static int scrub_one(struct kvt_scrubber *sc, struct kvt_dir *fan, const char *dir,
		     GPtrArray *ents, const char *name, GHashTable *seen)
{
	struct stat st;
	kvt_hash want, got;
	guint links;
	bool is_ref;
	kvt_autofd fd = -1;
	int ret;

	if (!kvt_object_parse_name(dir, name, &want, &is_ref))
		return 0; /* not an object's (kvtierfs-fsck reports it) */
	fd = kvt_dir_open_file(fan, name, O_RDONLY | O_NOATIME, 0, &st);
	if (fd == -EPERM)
		fd = kvt_dir_open_file(fan, name, O_RDONLY, 0, &st);
	if (fd < 0)
		return 0; /* gone meanwhile, or not a file: a resolve's to judge */
	if (!g_hash_table_add(seen, GSIZE_TO_POINTER((gsize)st.st_ino)))
		return 0;
	ret = hash_paced(sc, fd, (uint64_t)st.st_size, &got);
	if (ret == -EINTR)
		return ret;
	if (ret < 0 && ret != -ENODATA) {
		g_warning("scrub: objects/%s/%s: %s: left as it is", dir, name, g_strerror(-ret));
		return 0;
	}
	kvt_store_count(sc->s, KVT_STAT_scrub_objects, 1);
	kvt_store_count(sc->s, KVT_STAT_scrub_bytes, (uint64_t)st.st_size);
	if (ret == 0 && kvt_hash_equal(&got, &want))
		return 0;
	kvt_verifier_forget(sc->v, &want);
	kvt_store_count(sc->s, KVT_STAT_scrub_rotten, 1);
	links = remove_links(fan, ents, &want, st.st_ino);
	if (links)
		kvt_usage_move(sc->s, kvt_usage_fan_of(name), -(int64_t)st.st_size);
	g_warning("scrub: objects/%s/%s: its %" G_GINT64_FORMAT " bytes no longer hash to its "
		  "name: removed with its %u links; the names that used it are purged at "
		  "their next lookup", dir, name, (gint64)st.st_size, links);
	return 0;
}

/* Where the walk resumes (scrub.h), 0 when nothing says. */
static guint resume_at(struct kvt_scrubber *sc)
{
	char buf[8] = { 0 };
	ssize_t n = kvt_dir_getxattr(sc->s->layout.objects, KVT_SCRUB_XATTR, buf,
				     sizeof(buf) - 1);
	guint64 b;

	if (n <= 0 || !g_ascii_string_to_unsigned(buf, 10, 0, 255, &b, NULL))
		return 0;
	return (guint)b;
}

static void keep_place(struct kvt_scrubber *sc, guint b)
{
	char buf[8];
	int len = snprintf(buf, sizeof(buf), "%u", b);

	/* Best effort: without it a remount starts over. */
	kvt_dir_setxattr(sc->s->layout.objects, KVT_SCRUB_XATTR, buf, (size_t)len, 0);
}

/* One fan-out directory.  -EINTR on a stop. */
static int scrub_fanout(struct kvt_scrubber *sc, guint b)
{
	g_autoptr(kvt_dir) fan = NULL;
	g_autoptr(GPtrArray) ents = NULL;
	g_autoptr(GHashTable) seen = g_hash_table_new(NULL, NULL);
	char dir[3];
	int ret;

	g_snprintf(dir, sizeof(dir), "%02x", b);
	ret = kvt_dir_open(sc->s->layout.objects, dir, &fan);
	if (ret < 0)
		return 0; /* none there yet */
	ents = kvt_dir_list(fan, true, &ret);
	if (!ents)
		return 0;
	for (guint i = 0; i < ents->len; i++) {
		const struct kvt_dirent *e = ents->pdata[i];

		ret = scrub_one(sc, fan, dir, ents, e->name, seen);
		if (ret < 0)
			return ret;
	}
	if (g_hash_table_size(seen))
		g_debug("scrub: objects/%s: %u objects hashed", dir, g_hash_table_size(seen));
	return 0;
}

static gpointer run(gpointer data)
{
	struct kvt_scrubber *sc = data;
	guint b = resume_at(sc);

	if (b)
		g_message("scrub: resumes at objects/%02x", b);
	for (;;) {
		gint64 t = g_get_monotonic_time();

		sc->t0 = t;
		sc->hashed = 0;
		for (; b < 256; b++) {
			if (scrub_fanout(sc, b) < 0)
				return NULL;
			keep_place(sc, (b + 1) % 256);
		}
		b = 0;
		kvt_store_count(sc->s, KVT_STAT_scrub_passes, 1);
		g_info("scrub: a pass over the store in %.1f s",
		       (double)(g_get_monotonic_time() - t) / G_USEC_PER_SEC);
		if (!nap(sc, (gint64)(sc->interval * G_USEC_PER_SEC)))
			return NULL;
	}
}

struct kvt_scrubber *kvt_scrubber_start(struct kvt_store *s, struct kvt_verifier *v,
					uint64_t rate, double interval)
{
	struct kvt_scrubber *sc = g_new0(struct kvt_scrubber, 1);

	sc->s = s;
	sc->v = v;
	sc->rate = MAX(rate, 1);
	sc->interval = interval;
	sc->buf = g_malloc(CHUNK);
	g_mutex_init(&sc->lock);
	g_cond_init(&sc->cond);
	sc->thread = g_thread_new("kvt-scrub", run, sc);
	return sc;
}

void kvt_scrubber_free(struct kvt_scrubber *sc)
{
	if (!sc)
		return;
	g_mutex_lock(&sc->lock);
	sc->stop = true;
	g_cond_broadcast(&sc->cond);
	g_mutex_unlock(&sc->lock);
	g_thread_join(sc->thread);
	g_mutex_clear(&sc->lock);
	g_cond_clear(&sc->cond);
	g_free(sc->buf);
	g_free(sc);
}
